# jobrt's task forker (see forker.ts), run as `perl -f forker.pl <syscall numbers> [-- <jobrt pid> <command>]`:
# plain perl with no module, so it starts in a few ms from Debian's perl-base (Essential).
# Descriptor, identity and exec calls go through syscall(2) with the numbers forker.ts passes for
# this architecture, because POSIX.pm alone costs more start-up time than the rest of the program.
#
# fds: 0-2 jobrt's own (a task that inherits them gets them), 3 the control socket, 4.. the tasks'
# stdio, each passed once. Requests on fd 3: "<bytes>\n" then NUL-separated fields: id, the forker
# fds for the task's 0 1 2 (-1: /dev/null), the descriptors passed on purpose as "k:n,..." (the
# forker's k becomes the task's n: Slurm's PMI-2 socket), uid, gid ("" for no drop), the task cgroup's
# cgroup.procs ("" for none), cwd, argc, argv..., env "K=V"... Reports: "S id pid" started,
# "F id errno stage" not started, "X pid status" reaped with its raw wait status.
# When fd 3 reaches EOF the forker reaps and reports what it started, then exits.
# After the syscall numbers may come "--", jobrt's pid and a command (with this program's
# environment): if jobrt dies while tasks run, the forker runs it (see orphaned) and exits.
# Or "--join": this forker is a task of a Slurm step that joined the node's jobrt (joiner.pl,
# docs/node-step.md); fd 3 is its connection to that jobrt, its own 0-2 are its task's, and it
# runs that one task. Then two more requests: "P" NUL text (printed on its stderr, the task's)
# and "E" NUL status (its task's end, 128+N for signal N, as a `jobrt exec` exits); a signal it
# catches is reported as "K name"; it exits with that status, and if jobrt goes away first it
# kills its task.

# A short name in ps and /proc/<pid>/cmdline, not the path of this file and its arguments.
$0 = "jobrt-task-forker";
my ($SETSID, $DUP3, $FCNTL, $CLOSE, $SETGROUPS, $SETRESGID, $SETRESUID, $EXECVE, $OPENAT, $WRITE, $PIPE2, $READ, $O_CLOEXEC) = map { 0 + $_ } @ARGV;
my $SELF = "0\n";
# The status of a process whose exec failed, as a shell gives for a command it cannot run; a
# constant sub, inlined where it is used (no module, no value a child would touch). createstart.pl
# (runtime-oci) has the same one: the two are separate packages' programs, each run on its own.
sub EXEC_FAILED () { 127 }
my $DEVNULL = "/dev/null";
# A task's exec-error pipe by pipe2(2), read by read(2): a perl file handle per pipe end cost
# about 14 page faults per task in the forker (copy-on-write after each fork).
my $PIPE = pack("ii", -1, -1);
my $WHY = "\0" x 256;
my $PIDFD_OPEN = 434;
my ($PARENT, @ORPHAN, $JOIN, $END);
for my $i (0 .. $#ARGV) {
  if ($ARGV[$i] eq "--join") { $JOIN = 1; last }
  if ($ARGV[$i] eq "--") { ($PARENT, @ORPHAN) = @ARGV[$i + 1 .. $#ARGV]; last }
}
my @CAUGHT = qw(HUP INT QUIT USR1 USR2 ALRM TERM);
# Slurm signals every process of a step (scancel, the time limit, srun's Ctrl-C): the forker must
# live until jobrt closes fd 3. Caught, not ignored: a caught signal is reset to its default at
# exec, an ignored one would be inherited by every task.
$SIG{$_} = sub {} for @CAUGHT;
# perl ignores SIGFPE (its exec restores it, execve(2) does not): a task must not inherit that.
$SIG{FPE} = "DEFAULT";
opendir(my $dh, "/proc/self/fd") or die "jobrt task forker: /proc/self/fd: $!\n";
my @inherited = grep { /^\d+$/ && $_ > 2 } readdir($dh);
closedir($dh);
# Nothing above 2 (the control socket, every task's stdio, what jobrt inherited) reaches a task.
syscall($FCNTL, 0 + $_, 2, 1) for @inherited;
open(my $ctl, "+<&=", 3) or die "jobrt task forker: fd 3: $!\n";
my (%pidfd, %pidOf, $poll, $eof);
my $in = "";
# A joined task's signals are the node's jobrt's to deliver, as its ExecSpec says.
if ($JOIN) {
  $SIG{$_} = sub { report("K $_[0]\n") } for @CAUGHT;
  # A report to a jobrt that died is that end-of-file, not a death by SIGPIPE (caught: exec resets it).
  $SIG{PIPE} = sub {};
}

sub report {
  my $m = shift;
  while (length $m) {
    my $n = syswrite($ctl, $m);
    next if !defined $n && $! == 4;
    # A joined forker's jobrt is gone: its task is stopped as on end-of-file (joined).
    if (!defined $n) { if ($JOIN) { $eof = 1; return } exit 1 }
    substr($m, 0, $n) = "";
  }
}

sub reap {
  while ((my $pid = waitpid(-1, 1)) > 0) {
    my $st = $?;
    my $fd = delete $pidfd{$pid};
    next unless defined $fd;
    if ($fd >= 0) { delete $pidOf{$fd}; syscall($CLOSE, $fd) }
    report("X $pid $st\n");
  }
}

sub fail {
  my $m = (0 + $!) . " $_[1]";
  syscall($WRITE, $_[0], $m, length $m);
  exit EXEC_FAILED;
}

# Each page the child writes before its exec is copied (copy-on-write), and a page fault costs
# 15-20 us on a Firecracker VM: the child touches as few perl values as it can, with what the
# parent prepared, and no file handle.
sub child {
  my ($ew, $fds, $extra, $uid, $gid, $procs, $cwd, $argv, $env, $args, $envp) = @_;
  # Born in its task cgroup: the task cannot fork before it is tracked ("0": the writer itself).
  if ($procs ne "") {
    my $f = syscall($OPENAT, -100, $procs, $O_CLOEXEC | 1);
    $f >= 0 or fail($ew, "cgroup");
    syscall($WRITE, $f, $SELF, 2) == 2 or fail($ew, "cgroup");
    syscall($CLOSE, $f);
  }
  syscall($SETSID) >= 0 or fail($ew, "setsid");
  for my $t (0 .. 2) {
    my $s = $fds->[$t];
    # /dev/null close-on-exec, read-only for 0: only its copy on $t reaches the task.
    $s = syscall($OPENAT, -100, $DEVNULL, $O_CLOEXEC | ($t ? 2 : 0)) if $s < 0;
    $s >= 0 or fail($ew, "open /dev/null");
    if ($s != $t) { syscall($DUP3, $s, $t, 0) >= 0 or fail($ew, "dup3") }
    elsif ($fds->[$t] < 0) { syscall($FCNTL, $s, 2, 0) }
  }
  # After 0-2, which never are an n here (forker.ts passes n > 2 only); fcntl F_SETFD 0 when k is n.
  for (my $i = 0; $i < @$extra; $i += 2) {
    my ($k, $n) = ($extra->[$i], $extra->[$i + 1]);
    if ($k != $n) { syscall($DUP3, $k, $n, 0) >= 0 or fail($ew, "dup3") }
    else { syscall($FCNTL, $n, 2, 0) >= 0 or fail($ew, "fcntl") }
  }
  if ($uid ne "") {
    syscall($SETGROUPS, 0, 0) == 0 or fail($ew, "setgroups");
    syscall($SETRESGID, 0 + $gid, 0 + $gid, 0 + $gid) == 0 or fail($ew, "setgid");
    syscall($SETRESUID, 0 + $uid, 0 + $uid, 0 + $uid) == 0 or fail($ew, "setuid");
  }
  # As the job user, after the drop (Slurm's order): root must not enter a directory for it.
  chdir($cwd) or fail($ew, "chdir");
  # A path is exec'd by execve(2) with the task's environment as it came: filling %ENV costs a
  # setenv per variable in the child, most of its time before the exec. A bare name (searched in
  # the task's PATH) and a file the kernel cannot run (ENOEXEC: execvp runs it with /bin/sh) go
  # through perl's exec.
  if (defined $args) {
    syscall($EXECVE, $argv->[0], $args, $envp);
    fail($ew, "exec") unless $! == 8;
  }
  %ENV = ();
  for (@$env) { my $i = index($_, "="); $ENV{substr($_, 0, $i)} = substr($_, $i + 1) }
  { exec { $argv->[0] } @$argv }
  fail($ew, "exec");
}

# jobrt died while its tasks ran (SIGKILL: Slurm's, the OOM killer's): nothing else stops them or
# removes their containers (a root container is outside Slurm's reach, in a cgroup of runc's) until
# the Epilog, once slurmstepd gives up on the tasks' stdio. jobrt's own crash cleanup of its step
# runs now, as this forker's user; the forker reaps the tasks meanwhile and exits when it is done.
# Nobody reads fd 3 any more: nothing is reported.
sub orphaned {
  my $pid = fork();
  if (defined $pid && $pid == 0) {
    open(STDIN, "<", $DEVNULL);
    open(STDOUT, ">", $DEVNULL);
    { exec { $ORPHAN[0] } @ORPHAN }
    exit EXEC_FAILED;
  }
  while (defined $pid) { my $w = waitpid(-1, 0); last if $w == $pid || $w < 0 }
  exit 0;
}

# A joined task's end: exit as the node's jobrt says. If that jobrt went away first, the task (its
# own process group) is killed and waited for.
sub joined {
  exit $END if defined $END;
  syswrite(STDERR, "jobrt: the node's jobrt of this step is gone: this task is stopped\n");
  kill("KILL", -$_) for keys %pidfd;
  1 while waitpid(-1, 0) > 0;
  exit 137;
}

sub start {
  if ($JOIN && $_[0] =~ /\A([PE])\0(.*)\z/s) { return $1 eq "E" ? ($END = $2) : syswrite(STDERR, $2) }
  my ($id, $i0, $i1, $i2, $passed, $uid, $gid, $procs, $cwd, $argc, @rest) = split /\0/, $_[0], -1;
  my @argv = splice(@rest, 0, $argc);
  my @fds = map { 0 + $_ } ($i0, $i1, $i2);
  my @extra = map { 0 + $_ } split /[:,]/, $passed;
  # Pointers to the strings of @argv and @rest, valid in the child: it has the same addresses.
  my ($args, $envp) = index($argv[0], "/") >= 0 ? (pack("p*", @argv, undef), pack("p*", @rest, undef)) : ();
  my ($pid, $errno, $why);
  if (syscall($PIPE2, $PIPE, $O_CLOEXEC) == 0) {
    my ($er, $ew) = unpack("ii", $PIPE);
    $pid = fork();
    child($ew, \@fds, \@extra, $uid, $gid, $procs, $cwd, \@argv, \@rest, $args, $envp) if defined $pid && $pid == 0;
    $errno = 0 + $!;
    syscall($CLOSE, $ew);
    if (defined $pid) {
      my $n;
      while (($n = syscall($READ, $er, $WHY, 256)) < 0) { last unless $! == 4 }
      $why = $n > 0 ? substr($WHY, 0, $n) : "";
    }
    syscall($CLOSE, $er);
  } else {
    $errno = 0 + $!;
  }
  # The task's stdio is its own now: jobrt sees its pipes close when it ends.
  for (@fds) { syscall($CLOSE, $_) if $_ > 3 }
  for (my $i = 0; $i < @extra; $i += 2) { syscall($CLOSE, $extra[$i]) }
  return report("F $id $errno fork\n") unless defined $pid;
  if ($why ne "") { waitpid($pid, 0); return report("F $id $why\n") }
  my $fd = syscall($PIDFD_OPEN, $pid, 0);
  $pidfd{$pid} = $fd;
  if ($fd >= 0) { $pidOf{$fd} = $pid } else { $poll = 1 }
  report("S $id $pid\n");
}

# jobrt's end is seen by a pidfd of it (readable once it has exited), else by polling getppid.
my $jobrt = @ORPHAN ? syscall($PIDFD_OPEN, 0 + $PARENT, 0) : -1;
$poll = 1 if @ORPHAN && $jobrt < 0;
for (;;) {
  reap();
  orphaned() if @ORPHAN && getppid() != $PARENT;
  joined() if $JOIN && (defined $END && !%pidfd || $eof);
  exit 0 if $eof && !%pidfd;
  my $rin = "";
  vec($rin, 3, 1) = 1 unless $eof;
  vec($rin, $_, 1) = 1 for keys %pidOf;
  vec($rin, $jobrt, 1) = 1 if $jobrt >= 0;
  # Without pidfds (Linux before 5.3) a task's end is polled for.
  my $n = select(my $rout = $rin, undef, undef, $poll ? 0.02 : undef);
  orphaned() if $n > 0 && $jobrt >= 0 && vec($rout, $jobrt, 1);
  next unless $n > 0 && vec($rout, 3, 1);
  my $r = sysread($ctl, $in, 65536, length $in);
  if (!$r) { $eof = 1 unless !defined $r && ($! == 4 || $! == 11); next }
  # Requests are found by offset and the ones read dropped once: a capture on $in and a chop of
  # it per request copied the rest of it each time, and after each fork every page written is a
  # copy-on-write fault (about 60 a task with a few hundred requests waiting).
  my $at = 0;
  for (;;) {
    my $nl = index($in, "\n", $at);
    last if $nl < 0;
    my $len = substr($in, $at, $nl - $at);
    last unless $len =~ /^\d+\z/ && length($in) >= $nl + 1 + $len;
    $at = $nl + 1 + $len;
    start(substr($in, $nl + 1, $len));
  }
  substr($in, 0, $at) = "";
}
