# A create/start task (see createstart.ts), run by the host in place of the task, already as the
# job user, as
#   perl -f -- createstart.pl <prctl nr> <SIGUSR1> <O_NONBLOCK> <O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW> <task dir>
#     <create> <kill> <delete>                              the watchdog's (Kill/Delete without %p)
#     <start> <query> <kill> <delete> <start problem>       "" for a command that cannot be expanded
#     <create ms> <start ms> <query ms> <kill ms> <delete ms> <grace ms> <pid mark> <verbose 0|1>
#     <missing-command look: argv...>
# It runs RunTimeCreate (through the watchdog), waits for `created`, runs RunTimeStart with the
# task's stdio, waits as the container init's subreaper for its exit and real status (W1),
# tears the container down and exits with that status (a signal death is raised again on
# itself). Every failure is one line `jobrt-oci: ...` on the task's stderr, a teardown, and 125
# (or the first stop signal's death). SIGTERM/SIGINT/SIGHUP to it are forwarded to the container
# once it exists (RunTimeKill, then SIGKILL after the grace time). The whole lifecycle is here:
# no other program does any of it (docs/decisions.md, "One language per path").
#
# Plain perl with no module but strict (and Config for a rare message; perl-base, Debian's
# Essential perl): no Time::HiRes, so time comes from /proc/uptime, and no JSON, so the state JSON
# is read with patterns. prctl goes through syscall() with the number createstart.ts passes for
# this architecture, as it passes the open flags (Fcntl would cost a module load per task).
# Every caught signal writes a byte to a pipe each wait selects on, so SIGCHLD or a stop signal
# ends a wait at once, even one perl's deferred handler ran just before the select.
# strict, never warnings: a warning would be a line on the task's stderr.
use strict;

my ($PRCTL, $SIGUSR1, $O_NONBLOCK, $O_NOTE, $DIR, @W) = splice(@ARGV, 0, 8);
# Numbers, not strings: syscall() passes a string as a pointer.
($PRCTL, $SIGUSR1, $O_NONBLOCK, $O_NOTE) = (0 + $PRCTL, 0 + $SIGUSR1, 0 + $O_NONBLOCK, 0 + $O_NOTE);
my %CMD = (RunTimeCreate => $W[0]);
my %WATCHDOG = (RunTimeKill => $W[1], RunTimeDelete => $W[2]);
@CMD{qw(RunTimeStart RunTimeQuery RunTimeKill RunTimeDelete)} = splice(@ARGV, 0, 4);
my $START_PROBLEM = shift @ARGV;
my %LIMIT;
@LIMIT{qw(RunTimeCreate RunTimeStart RunTimeQuery RunTimeKill RunTimeDelete)} = splice(@ARGV, 0, 5);
my ($GRACE, $MARK, $VERBOSE) = splice(@ARGV, 0, 3);
my @LOOKUP = @ARGV;
my $FAILURE = 125;
# The status of a child whose exec failed, as a shell gives for a command it cannot run; a constant
# sub, inlined at compile time (no module). The launcher's forker.pl has the same one: the two are
# separate packages' programs, each run on its own, so neither loads a file of the other's.
sub EXEC_FAILED () { 127 }
my %SIGNO = (HUP => 1, INT => 2, KILL => 9, TERM => 15);
my @STOP = qw(TERM INT HUP);

# Caught from the start, not ignored: a caught signal is reset to its default at exec.
my @sigs;
# The wake pipe: its write end non-blocking (F_SETFL is 4 on every Linux architecture).
sub wake_pipe {
  pipe(my $r, my $w) or return ();
  fcntl($w, 4, $O_NONBLOCK);
  return ($r, $w);
}
my ($WAKE_R, $WAKE_W) = wake_pipe();
sub wake { syswrite($WAKE_W, "x") if $WAKE_W }
$SIG{$_} = sub { push @sigs, $_[0]; wake() } for @STOP;
$SIG{CHLD} = \&wake;
my $SUBREAPER = syscall($PRCTL, 36, 1, 0, 0, 0) == 0;    # PR_SET_CHILD_SUBREAPER

# Per task: the watchdog's pid, the container's pid once known, the pending SIGKILL, RunTimeKill runs.
my ($wpid, $cpid, $killat, %killing, $fwd);

sub now { open(my $u, "<", "/proc/uptime") or return time; (split / /, scalar <$u>)[0] }
sub say { print STDERR "jobrt-oci: $_[0]\n" }
# In a forked child: becomes argv, or exits EXEC_FAILED.
sub exec_or_fail { { exec { $_[0] } @_ } exit EXEC_FAILED }
sub verbose { say($_[0]) if $VERBOSE }
sub seconds { $_[0] / 1000 }
sub timed_out { my ($key, $command) = @_; "$key did not finish within " . seconds($LIMIT{$key}) . " s and was killed: $command" }
sub signame { require Config; "SIG" . (split " ", $Config::Config{sig_name})[$_[0]] }
# A select on the wake pipe (and `$rin`'s fds): > 0 when one is readable; the wake pipe is drained.
sub wait_for {
  my ($rin, $seconds) = @_;
  vec($rin, fileno($WAKE_R), 1) = 1 if $WAKE_R;
  my $n = select(my $rout = $rin, undef, undef, $seconds);
  sysread($WAKE_R, my $b, 512) if $n > 0 && $WAKE_R && vec($rout, fileno($WAKE_R), 1);
  return ($n, $rout);
}
sub pause { wait_for("", $_[0]) }

# A command with %p, once the pid is known; undef with why when it cannot be run now.
sub expanded {
  my ($key) = @_;
  my $c = $CMD{$key};
  return (undef, "it cannot be expanded here") if $c eq "";
  if (index($c, $MARK) >= 0) {
    return (undef, "%p (runtime process pid) is not known here") unless defined $cpid;
    $c =~ s/\Q$MARK\E/$cpid/g;
  }
  return ($c);
}

# Runs argv (a command string goes through /bin/sh -c) in its own process group, stdin from
# /dev/null, its output captured (1 MiB each). The result is taken when it exits, not when its
# pipes close (a runtime may hand a pipe to a long-lived process, W2); output still in the pipes
# is read for 0.25 s. {code|sig, out, err}, {timeout}, or {error} when it could not start.
sub capture {
  my ($argv, $limit) = @_;
  my @argv = ref $argv ? @$argv : ("/bin/sh", "-c", $argv);
  (pipe(my $or, my $ow) && pipe(my $er, my $ew)) or return { error => "$!" };
  my $p = fork();
  return { error => "$!" } unless defined $p;
  if ($p == 0) {
    setpgrp(0, 0);
    $SIG{$_} = "DEFAULT" for @STOP, "CHLD";
    open(STDIN, "<", "/dev/null"); open(STDOUT, ">&", $ow); open(STDERR, ">&", $ew);
    exec_or_fail(@argv);
  }
  close $ow; close $ew;
  my %fh = (out => $or, err => $er);
  my %buf = (out => "", err => "");
  my $end = now() + seconds($limit);
  my ($st, $drain);
  for (;;) {
    if (!defined $st && waitpid($p, 1) == $p) { $st = $?; $drain = now() + 0.25; }
    last if defined $st && (!%fh || now() > $drain);
    if (!defined $st && now() > $end) { kill "KILL", -$p; waitpid($p, 0); return { timeout => 1 }; }
    my $rin = "";
    vec($rin, fileno($_), 1) = 1 for values %fh;
    my ($n, $rout) = wait_for($rin, %fh ? 0.1 : 0.01);
    next unless $n > 0;
    for my $k (keys %fh) {
      next unless vec($rout, fileno($fh{$k}), 1);
      if (sysread($fh{$k}, my $b, 65536)) { $buf{$k} .= $b if length($buf{$k}) < 1048576; }
      else { close delete $fh{$k}; }
    }
  }
  return { ($st & 127) ? (sig => $st & 127) : (code => $st >> 8), out => $buf{out}, err => $buf{err} };
}

# A RunTime* command, captured; a time-out or a failure to start is `die`d with its message.
sub run_command {
  my ($key) = @_;
  my ($command, $why) = expanded($key);
  die { skip => "$key not run: $why" } unless defined $command;
  verbose("$key: $command");
  my $r = capture($command, $LIMIT{$key});
  die { message => timed_out($key, $command) } if $r->{timeout};
  die { message => "$key: cannot start /bin/sh: $r->{error}" } if exists $r->{error};
  return $r;
}

# How a command ended, for messages: "exited with status N" or "was killed by SIGX", and the
# last line of its stderr.
sub describe {
  my ($r) = @_;
  my $how = defined $r->{code} ? "exited with status $r->{code}" : "was killed by " . signame($r->{sig});
  my @lines = grep { $_ ne "" } split /\n/, trim($r->{err} // "");
  return @lines ? "$how: $lines[-1]" : $how;
}

sub trim { my ($s) = @_; $s =~ s/^\s+|\s+$//g; $s }

# A RunTimeQuery result as OCI state: {status, pid}; undef for anything else ("no container").
sub state_of {
  my ($r) = @_;
  return undef unless defined $r && defined $r->{code} && $r->{code} == 0 && $r->{out} =~ /^\s*\{.*\}\s*$/s;
  my ($status) = $r->{out} =~ /"status"\s*:\s*"([^"\\]*)"/;
  return undef unless defined $status;
  my ($pid) = $r->{out} =~ /"pid"\s*:\s*(\d+)/;
  return { status => $status, (defined $pid && $pid > 0 ? (pid => $pid) : ()) };
}

# JSON.stringify of a string, for the one warning that quotes a runtime's output.
sub quoted {
  my ($s) = @_;
  $s =~ s/(["\\])/\\$1/g;
  $s =~ s/\n/\\n/g; $s =~ s/\r/\\r/g; $s =~ s/\t/\\t/g;
  $s =~ s/([\x00-\x1f])/sprintf("\\u%04x", ord $1)/ge;
  return "\"$s\"";
}

# The kill/delete sequence of teardown.ts (with a query), as the task's own teardown: a command
# that fails or cannot run is a warning, never the end.
sub safe {
  my ($key) = @_;
  my $r = eval { run_command($key) };
  return $r if $r;
  my $e = $@;
  if (ref $e && exists $e->{skip}) { verbose($e->{skip}) }
  else { say("$key: " . (ref $e ? $e->{message} : $e)) }
  return undef;
}

my %ACTIVE = map { $_ => 1 } qw(creating created running paused);

sub teardown {
  my ($exited) = @_;
  # The init's exit was seen: the container is stopped, no need to ask the runtime first.
  my $first = $exited ? undef : safe("RunTimeQuery");
  my $st = $exited ? { status => "stopped" } : state_of($first);
  if (!$st && $first && defined $first->{code} && $first->{code} == 0) {
    # Printed no state: the runtime is broken, not the container gone. Delete it anyway.
    say("RunTimeQuery exited 0 but printed no OCI state JSON (" . quoted(substr(trim($first->{out}), 0, 80)) . "); running RunTimeKill and RunTimeDelete anyway");
    safe("RunTimeKill");
    my $del = safe("RunTimeDelete");
    return if $del && defined $del->{code} && $del->{code} == 0;
    say("RunTimeDelete " . ($del ? "exited with status " . ($del->{code} // signame($del->{sig})) . ": " . trim($del->{err}) : "did not run") . "; taking the container for gone");
    return;
  }
  if (!$st) {
    # A query that timed out or was killed says nothing of the container: delete it anyway.
    if (!$first || !defined $first->{code}) {
      verbose("RunTimeQuery gave no answer; running RunTimeDelete anyway");
      safe("RunTimeDelete");
    }
    return;
  }
  if ($ACTIVE{$st->{status}} && $st->{status} ne "created") {
    $st = stop_container();
    return unless $st;
  }
  my $del = safe("RunTimeDelete");
  # The host's cleanup has nothing left to ask about this container (taskteardown.ts).
  if ($del && defined $del->{code} && $del->{code} == 0) { note("container.deleted", "", "the container's deletion"); return; }
  say("RunTimeDelete exited with status " . ($del->{code} // signame($del->{sig})) . ": " . trim($del->{err})) if $del;
}

# RunTimeKill, then SIGKILL to the container's pid after the grace time; its state after that.
sub stop_container {
  safe("RunTimeKill");
  my $deadline = now() + seconds($GRACE);
  my $delay = 2;
  for (;;) {
    my $st = state_of(safe("RunTimeQuery"));
    return $st if !$st || !$ACTIVE{$st->{status}};
    if (now() >= $deadline) {
      if (defined $st->{pid}) {
        verbose("container still $st->{status} after $GRACE ms: SIGKILL to pid $st->{pid}");
        kill "KILL", $st->{pid};
      }
      pause(0.05);
      return state_of(safe("RunTimeQuery"));
    }
    pause($delay / 1000);
    $delay = $delay * 2 > 100 ? 100 : $delay * 2;
  }
}

# Tears the container down, ends the watchdog (a kill of its group, not a signal it traps: there
# is nothing left for it to do) and exits with the task's status.
sub finish {
  my ($code, $signal, $exited) = @_;
  $killat = undef;
  teardown($exited);
  kill "KILL", -$wpid if $wpid;
  $SIG{$_} = "DEFAULT" for @STOP, "CHLD";
  if ($signal) { kill $signal, $$; exit 128 + $signal; }
  exit $code;
}

sub fail {
  say($_[0]);
  finish($FAILURE, @sigs ? $SIGNO{$sigs[0]} : undef, 0);
}

# A stop signal once the container exists: RunTimeKill (in the background), SIGKILL after the
# grace time; a RunTimeKill that does not finish in time is killed and said.
sub forward {
  while ($fwd < @sigs) {
    $fwd++;
    my ($command, $why) = expanded("RunTimeKill");
    if (!defined $command) { verbose("RunTimeKill not run: $why"); }
    else {
      verbose("RunTimeKill: $command");
      my $k = fork();
      if (defined $k && $k == 0) {
        setpgrp(0, 0);
        $SIG{$_} = "DEFAULT" for @STOP, "CHLD";
        open(STDIN, "<", "/dev/null"); open(STDOUT, ">", "/dev/null"); open(STDERR, ">", "/dev/null");
        exec_or_fail("/bin/sh", "-c", $command);
      }
      $killing{$k} = [now() + seconds($LIMIT{RunTimeKill}), $command] if defined $k;
    }
    $killat //= now() + seconds($GRACE);
  }
  for my $k (keys %killing) {
    if (waitpid($k, 1) == $k) { delete $killing{$k}; next; }
    next unless now() > $killing{$k}[0];
    kill "KILL", -$k;
    waitpid($k, 0);
    say(timed_out("RunTimeKill", $killing{$k}[1]));
    delete $killing{$k};
  }
  if (defined $killat && now() >= $killat) { kill "KILL", $cpid; $killat = undef; }
}

# 0. The watchdog: a fork of this program (see watchdog.ts) that runs RunTimeCreate and reports its
# status on a pipe. In its own process group, with SIGUSR1 when we die (PR_SET_PDEATHSIG), its
# pid in the task dir.
sub start_watchdog {
  pipe(my $r, my $w) or die "jobrt-oci: pipe: $!\n";
  my $parent = $$;
  $wpid = fork() // die "jobrt-oci: fork: $!\n";
  if ($wpid == 0) { close $r; watchdog($w, $parent); }
  close $w;
  if (open(my $f, ">", "$DIR/.watchdog.pid.$$")) {
    print $f "$wpid\n";
    close $f;
    rename("$DIR/.watchdog.pid.$$", "$DIR/watchdog.pid");
  }
  return $r;
}

# The watchdog's life; it never returns. The create runs with the task's stdio, in this group, with
# the default signal dispositions the task's would have. A USR1 during the create only sets a
# flag (the create finishes: runc killed half-way leaves its state dir and cgroups behind); the
# handler that tears down is installed before the flag is looked at, so none falls between.
sub watchdog {
  my ($report, $parent) = @_;
  $0 = "jobrt-oci-watchdog";    # /proc/<pid>/cmdline: cleanup recognises it by that
  my $gone;
  $SIG{USR1} = sub { $gone = 1 };
  $SIG{$_} = "DEFAULT" for @STOP;
  close $WAKE_R if $WAKE_R;
  close $WAKE_W if $WAKE_W;
  ($WAKE_R, $WAKE_W) = wake_pipe();
  syscall($PRCTL, 1, $SIGUSR1, 0, 0, 0);    # PR_SET_PDEATHSIG
  exit 0 if getppid() != $parent;
  setpgrp(0, 0);
  my $c = fork();
  if (defined $c && $c == 0) {
    $SIG{$_} = "DEFAULT" for "USR1", "CHLD";
    exec_or_fail("/bin/sh", "-c", $CMD{RunTimeCreate});
  }
  my $st = defined $c && waitpid($c, 0) == $c ? $? : EXEC_FAILED << 8;
  # A supervisor that died makes the report's write fail: no SIGPIPE for that.
  $SIG{PIPE} = "IGNORE";
  syswrite($report, (($st & 127) ? 128 + ($st & 127) : $st >> 8) . "\n");
  close $report;
  open(STDIN, "<", "/dev/null"); open(STDOUT, ">", "/dev/null");
  $SIG{USR1} = \&watchdog_teardown;
  watchdog_teardown() if $gone;
  select(undef, undef, undef, 3600) for 1 .. 1e9;
  exit 0;
}

# The watchdog's teardown once the supervisor is gone: RunTimeKill and RunTimeDelete (those that
# expand without %p), each under its time-out, their output dropped.
sub watchdog_teardown {
  $SIG{USR1} = "IGNORE";
  for my $key (qw(RunTimeKill RunTimeDelete)) {
    my $command = $WATCHDOG{$key};
    capture($command, $LIMIT{$key}) if $command ne "";
  }
  exit 0;
}

# 1. RunTimeCreate's status from the watchdog; past its time-out the watchdog's group is killed.
sub create {
  my ($r) = @_;
  verbose("RunTimeCreate (run by the watchdog, pid $wpid): $CMD{RunTimeCreate}");
  my $end = now() + seconds($LIMIT{RunTimeCreate});
  my $text = "";
  for (;;) {
    my $left = $end - now();
    if ($left <= 0) { kill "KILL", -$wpid; fail(timed_out("RunTimeCreate", $CMD{RunTimeCreate})); }
    my $rin = "";
    vec($rin, fileno($r), 1) = 1;
    next unless select(my $rout = $rin, undef, undef, $left > 1 ? 1 : $left) > 0;
    last unless sysread($r, my $b, 64);
    $text .= $b;
  }
  close $r;
  fail("RunTimeCreate: the watchdog (pid $wpid) ended without its status: $CMD{RunTimeCreate}") unless $text =~ /^(\d+)\n/;
  my $code = $1;
  return if $code == 0;
  # runc create looks the command up before the task exists, and fails for a missing one.
  if (!@sigs && @LOOKUP) {
    my $m = capture([@LOOKUP], $LIMIT{RunTimeQuery});
    if (defined $m->{code} && ($m->{code} == 126 || $m->{code} == 127) && $m->{out} =~ /^(.+)\n/) {
      # The line carries its own "jobrt-oci: " (missingcommand.ts), as run mode prints it.
      print STDERR "$1\n";
      finish($m->{code}, undef, 0);
    }
  }
  fail("RunTimeCreate exited with status $code: $CMD{RunTimeCreate}");
}

# 2. Waits for "created" (a tight, bounded back-off); the container's pid.
sub wait_created {
  my $deadline = now() + seconds($LIMIT{RunTimeCreate});
  my $delay = 1;
  for (;;) {
    my $q = eval { run_command("RunTimeQuery") };
    fail(ref $@ ? $@->{message} // $@->{skip} : $@) unless $q;
    my $st = state_of($q);
    if ($st && $st->{status} eq "created") {
      fail("RunTimeQuery reported no pid for the created container") unless $st->{pid};
      return $st->{pid};
    }
    fail("container is $st->{status} after RunTimeCreate, expected created") if $st && $st->{status} ne "creating";
    fail("container did not reach \"created\" within " . seconds($LIMIT{RunTimeCreate}) . " s of RunTimeCreate") if now() > $deadline;
    pause($delay / 1000);
    $delay = $delay * 2 > 50 ? 50 : $delay * 2;
  }
}

# A note in the task dir for the host's cleanup (best effort): written whole, then renamed.
sub note {
  my ($name, $text, $what) = @_;
  my $tmp = "$DIR/.$name.$$.tmp";
  if (sysopen(my $f, $tmp, $O_NOTE, 0600)) {
    print $f $text;
    (close($f) && rename($tmp, "$DIR/$name")) or unlink $tmp;
  } else {
    verbose("cannot record $what: $!");
  }
}

# The container's pid, for the host's cleanup.
sub record_pid { note("container.pid", "$cpid\n", "the container pid") }

# /proc/<pid>/stat's state, parent and start time; () when it is gone.
sub proc_stat {
  open(my $s, "<", "/proc/$_[0]/stat") or return ();
  my $l = <$s>;
  my @f = split / /, substr($l, rindex($l, ")") + 2);
  return ($f[0], $f[1], $f[19]);
}

# 3. RunTimeStart with the task's stdio, and the init's exit (it may come first): as its
# subreaper with waitpid and its real status, or, when the runtime did not leave it to us, by a
# 5 ms /proc poll that sees the exit but not its status.
sub start_and_wait {
  my (undef, $ppid, $born) = proc_stat($cpid);
  my $reaper = $SUBREAPER && defined $ppid && $ppid == $$;
  verbose("not the container's parent (" . ($SUBREAPER ? "the runtime did not leave it to us" : "no subreaper") . "): exit status will not be available") unless $reaper;
  my ($start) = expanded("RunTimeStart");
  verbose("RunTimeStart: $start");
  my $sp = fork();
  fail("RunTimeStart: cannot start /bin/sh: $!") unless defined $sp;
  # The start command stays in the task's group, so the host's SIGKILL takes it, but ignores the stop
  # signals sent to that group (an ignored signal stays ignored across exec): a stop while it runs
  # is ours to forward to the container, and must not kill the start half-way.
  if ($sp == 0) {
    $SIG{$_} = "IGNORE" for @STOP;
    $SIG{CHLD} = "DEFAULT";
    exec_or_fail("/bin/sh", "-c", $start);
  }
  my $send = now() + seconds($LIMIT{RunTimeStart});
  my ($sst, $cst);
  for (;;) {
    $sst = $? if !defined $sst && waitpid($sp, 1) == $sp;
    if (!defined $cst && $reaper) { my $w = waitpid($cpid, 1); $cst = $w == $cpid ? $? : $w < 0 ? -1 : undef; }
    elsif (!defined $cst) { my ($state, undef, $t) = proc_stat($cpid); $cst = -1 if !defined $state || $state eq "Z" || $t ne $born; }
    if (!defined $sst && now() > $send) { kill "KILL", $sp; waitpid($sp, 0); fail(timed_out("RunTimeStart", $start)); }
    forward();
    fail("RunTimeStart " . describe({ ($sst & 127) ? (sig => $sst & 127) : (code => $sst >> 8) }) . ": $start") if defined $sst && $sst != 0;
    last if defined $sst && defined $cst;
    pause($reaper ? 0.1 : 0.005);
  }
  fail("the container exited but its exit status is not available (see docs/runtime-oci.md, create/start mode)") if $cst < 0;
  return $cst;
}

# Notes a crashed run with these ids left would speak for this run's container (W9).
unlink "$DIR/container.pid", "$DIR/container.deleted";
my $report = start_watchdog();
create($report);
$cpid = wait_created();
record_pid();
fail("SIG$sigs[0] before the container started") if @sigs;
fail($START_PROBLEM) if $START_PROBLEM ne "";
$fwd = 0;
my $status = start_and_wait();
finish(($status >> 8) & 255, $status & 127, 1);
