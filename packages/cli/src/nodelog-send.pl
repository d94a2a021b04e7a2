# jobrt's node log sender (docs/decisions.md, "The node log is sent by a perl datagram sender").
# Sends $ENV{JOBRT_NODELOG} as one datagram to the unix datagram socket named by $ARGV[0] (syslog's
# /dev/log by default), and exits 0 whatever happens: no socket, nobody bound to it, a receive
# queue that is full, a receiver that went away. It never waits: MSG_DONTWAIT drops the line
# rather than block on a full queue, and there is nothing else it could wait on.
use strict;
use Socket qw(AF_UNIX SOCK_DGRAM MSG_DONTWAIT pack_sockaddr_un);

my $path = $ARGV[0];
my $line = $ENV{JOBRT_NODELOG};
exit 0 unless defined $path && defined $line;
socket(my $sock, AF_UNIX, SOCK_DGRAM, 0) or exit 0;
send($sock, $line, MSG_DONTWAIT, pack_sockaddr_un($path));
exit 0;
