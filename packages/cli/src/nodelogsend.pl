# jobrt's node log sender (docs/decisions.md, "The node log is sent by a perl datagram sender").
# Sends each line of $ENV{JOBRT_NODELOG}, then each line jobrt writes on stdin until it closes it
# (or dies), as one datagram to the unix datagram socket named by $ARGV[0] (syslog's /dev/log by
# default), and exits 0 whatever happens: no socket, nobody bound to it, a receive queue that is
# full, a receiver that went away. It never waits on the receiver: MSG_DONTWAIT drops a line
# rather than block on a full queue. One sender serves a step: jobrt starts one process, not two.
use strict;
use Socket qw(AF_UNIX SOCK_DGRAM MSG_DONTWAIT pack_sockaddr_un);

my $path = $ARGV[0];
exit 0 unless defined $path;
socket(my $sock, AF_UNIX, SOCK_DGRAM, 0) or exit 0;
my $to = pack_sockaddr_un($path);
for my $line (split /\n/, $ENV{JOBRT_NODELOG} // "") {
  send($sock, $line, MSG_DONTWAIT, $to) if length $line;
}
while (my $line = <STDIN>) {
  chomp $line;
  send($sock, $line, MSG_DONTWAIT, $to) if length $line;
}
exit 0;
