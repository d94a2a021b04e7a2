#!/usr/bin/env perl
# The jobrt command (package.json "bin"): every command is bin.js under Node, except `jobrt exec`
# as a task of a Slurm step, which first meets the step's other tasks on this node
# (docs/node-step.md): the first to find no jobrt listening on the node step's socket, under its
# lock, runs bin.js as the node's jobrt; every other joins it and becomes the task forker of its
# own task (forker.pl --join), so that a node's tasks share one Node process. Plain perl with no
# module: a joiner's whole cost is this program, joiner.pl (the launcher's, its handshake) and the
# forker (docs/performance.md, "What a joiner would cost").
# JOBRT_NODE_STEP=0 in the environment: every task runs its own jobrt, as before.

my ($AF_UNIX, $SOCK_STREAM, $F_SETFD, $ECONNREFUSED, $ENOENT, $LOCK_EX) = (1, 1, 2, 111, 2, 2);
# Fewer than this many failed elections (the host went away before it answered): then our own jobrt.
my $TRIES = 3;

my $here = $0;
while (defined(my $l = readlink $here)) { $here = $l =~ m{^/} ? $l : ($here =~ m{^(.*/)} ? $1 : "") . $l }
my $DIR = $here =~ m{^(.*)/} ? $1 : ".";
# `do` looks a bare relative path up in @INC: ours is relative to the cwd.
$DIR = "./$DIR" unless $DIR =~ m{^\.{0,2}/};

sub node {
  { exec { "node" } "node", "--", "$DIR/bin.js", @ARGV }
  print STDERR "jobrt: cannot run node: $!\n";
  exit 127;
}

# `jobrt exec [options] -- cmd` as a Slurm task, not asking for help: the only case that meets.
sub joinable {
  return 0 unless @ARGV && $ARGV[0] eq "exec" && ($ENV{JOBRT_NODE_STEP} // "1") ne "0";
  for my $a (@ARGV[1 .. $#ARGV]) { last if $a eq "--"; return 0 if $a eq "--help" || $a eq "-h" }
  return ($ENV{SLURM_JOB_ID} // "") =~ /\A\d+\z/ && ($ENV{SLURM_STEP_ID} // "") =~ /\A\d+\z/
    && ($ENV{SLURMD_NODENAME} // "") =~ /\A[\w.-]+\z/;
}

# The user's own 0700 directory for node steps, or undef (someone else's, a link, open to others:
# a squatter makes the step slower, never joins another user's jobrt).
sub stepdir {
  my $tmp = $ENV{TMPDIR} // "";
  $tmp = "/tmp" unless $tmp =~ m{\A/};
  my $dir = "$tmp/jobrt-$<";
  mkdir($dir, 0700);
  my @st = lstat($dir);
  return undef unless @st && -d _ && $st[4] == $< && ($st[2] & 077) == 0;
  return $dir;
}

# The node's jobrt: bin.js, handed the lock. It listens on the socket, then lets the lock go;
# until then every other task of the step waits for the lock.
sub host {
  my ($lock, $path) = @_;
  return unless fcntl($lock, $F_SETFD, 0);
  $ENV{JOBRT_NODE_STEP_LOCK_FD} = fileno($lock);
  $ENV{JOBRT_NODE_STEP_SOCKET} = $path;
  node();
}

# One election. False: this task runs its own jobrt; true: try again (the node's jobrt went away
# before it answered). Becoming the node's jobrt or joining it does not return.
sub elect {
  my ($dir, $path, $addr) = @_;
  socket(my $s, $AF_UNIX, $SOCK_STREAM, 0) or return 0;
  if (!connect($s, $addr)) {
    # The node's jobrt listens before it lets the lock go: a socket that refuses a connection
    # while we hold the lock is stale (its jobrt died), and no socket means nobody is host yet.
    open(my $lock, ">>", "$dir/lock") or return 0;
    flock($lock, $LOCK_EX) or return 0;
    if (!connect($s, $addr)) {
      return 0 unless $! == $ECONNREFUSED || $! == $ENOENT;
      unlink($path) if $! == $ECONNREFUSED;
      host($lock, $path);
      return 0;
    }
    close($lock);
  }
  # Refused (another runtime or container than the node's jobrt runs, as srun --multi-prog can
  # give): this task runs its own.
  return 0 unless defined(do "$DIR/joiner.pl");
  return jobrt_join($s, "$DIR/forker.pl", @ARGV) eq "";
}

# A task of a step that jobrt's SPANK plugin runs (packages/spank, docs/slurm.md): slurmstepd
# executes this entry in the place of the task's program, which the plugin names here; the plugin's
# options follow in JOBRT_SPANK_OPTIONS, which `jobrt exec` reads and keeps from the task.
if (defined(my $program = delete $ENV{JOBRT_SPANK_PROGRAM})) {
  @ARGV = ("exec", "--", $program, @ARGV);
}

if (joinable()) {
  # A node's jobrt that went away mid-write is an answer (try again), not a death by SIGPIPE. Caught,
  # not ignored: exec resets a caught signal, and an ignored one would reach every task.
  local $SIG{PIPE} = sub {};
  my $dir = stepdir();
  my $path = defined $dir ? "$dir/$ENV{SLURMD_NODENAME}.$ENV{SLURM_JOB_ID}.$ENV{SLURM_STEP_ID}.sock" : "";
  if (defined $dir && length($path) < 108) {
    my $addr = pack("S Z108", $AF_UNIX, $path);
    for (1 .. $TRIES) { last unless elect($dir, $path, $addr) }
  }
}
node();
