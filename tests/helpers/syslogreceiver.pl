# A node log receiver for tests, as a log daemon binds /dev/log: binds a unix datagram socket at
# $ARGV[0] (mode 0666, as /dev/log), says "ready", then prints each datagram it receives as one
# line (newlines as \n). With $ARGV[1] eq "deaf" it first fills its own receive queue, then reads
# nothing: a daemon that has stopped reading, whose queue is full.
use strict;
use Socket qw(AF_UNIX SOCK_DGRAM MSG_DONTWAIT pack_sockaddr_un);
$| = 1;
my ($path, $mode) = @ARGV;
socket(my $sock, AF_UNIX, SOCK_DGRAM, 0) or die "socket: $!\n";
bind($sock, pack_sockaddr_un($path)) or die "bind $path: $!\n";
chmod(0666, $path) or die "chmod $path: $!\n";
if (defined $mode && $mode eq "deaf") {
  my $n = 0;
  $n++ while $n < 100000 && send($sock, "filler", MSG_DONTWAIT, pack_sockaddr_un($path));
  die "the queue of $path did not fill: $!\n" unless $!{EAGAIN};
  print "ready\n";
  sleep 3600 while 1;
}
print "ready\n";
while (defined(recv($sock, my $buf, 65536, 0))) {
  $buf =~ s/\n/\\n/g;
  print "$buf\n";
}
