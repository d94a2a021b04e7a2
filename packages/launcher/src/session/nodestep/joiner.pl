# The joining half of the node step (docs/node-step.md, "The wire protocol"): on a socket
# connected to the node's jobrt, says who this task is ("J1", pid, cwd, argc, argv, environment),
# reads the answer and, on "H <numbers>", becomes the forker of its own task (forker.pl --join).
# Plain perl with no module, as forker.pl. Two uses:
# - `do`ne by the jobrt entry (jobrt.pl), which calls jobrt_join after its election;
# - run as a program by @jobrt/testkit, which checks a runtime on this path:
#     perl -f joiner.pl FORKER SOCKET ARG...
#   and exits 75 if it was refused or the node's jobrt went away before it answered.

# Returns only if it did not join: the refusal's reason, or "" when the node's jobrt went away
# before it answered (the entry tries its election again).
sub jobrt_join {
  my ($s, $forker, @argv) = @_;
  my $cwd = readlink("/proc/self/cwd") // "";
  my @f = ("J1", $$, $cwd, scalar(@argv), @argv, map { "$_=$ENV{$_}" } grep { !/\AJOBRT_NODE_STEP/ } keys %ENV);
  my $m = join("\0", map { (my $v = $_) =~ s/\0//g; $v } @f);
  my $out = length($m) . "\n" . $m;
  while (length $out) {
    my $n = syswrite($s, $out);
    return "" unless defined $n;
    substr($out, 0, $n) = "";
  }
  my $line = "";
  while ($line !~ /\n\z/) { my $n = sysread($s, $line, 1, length $line); return "" unless $n }
  return $1 if $line =~ /\AR (.*)\n\z/;
  return "" unless $line =~ /\AH((?: \d+)+)\n\z/;
  # F_SETFD 0: the connection survives the exec, as the forker's control socket.
  fcntl($s, 2, 0) or return "";
  my $fd = fileno($s);
  { exec { $^X } "jobrt-task-forker", "-f", "--", $forker, split(" ", $1), "--join", $fd }
  return "";
}

unless (caller) {
  my ($forker, $path, @argv) = @ARGV;
  local $SIG{PIPE} = sub {};
  socket(my $s, 1, 1, 0) or die "jobrt: joiner: socket: $!\n";
  connect($s, pack("S Z108", 1, $path)) or die "jobrt: joiner: connect $path: $!\n";
  my $why = jobrt_join($s, $forker, @argv);
  print STDERR "jobrt: joiner: not joined: ", ($why eq "" ? "the node's jobrt went away" : $why), "\n";
  exit 75;
}
1;
