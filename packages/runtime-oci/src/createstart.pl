# The create/start task program (see watchdog.ts and fastpath.ts), run by the host in place of the
# task, already as the job user, as
#   perl -f -- createstart.pl <prctl nr> <SIGUSR1> <watchdog.sh> <task dir> <create> <kill> <delete>
#     <kill s> <delete s> <fast path: "0" | "1" start query kill delete <create start query delete
#     time-outs, ms> <grace ms> <pid mark>> <node supervisor argv...>
# Plain perl with no module but strict, Fcntl and Config (perl-base, Debian's Essential perl): no
# Time::HiRes, so time comes from /proc/uptime. prctl goes through syscall() with the number
# watchdog.ts passes for this architecture.
#
# 1. It makes itself a child subreaper (the flag survives execve) and says in JOBRT_OCI_SUBREAPER
#    whether that worked.
# 2. It forks the watchdog (watchdog.sh: in its own process group, with PR_SET_PDEATHSIG, its pid
#    recorded in the task dir), which runs RunTimeCreate and reports its status on a pipe.
# 3. With a fast path, it does the supervisor's common case itself (fastpath.ts); anything else is
#    handed over: it execs the node supervisor with JOBRT_OCI_RESUME saying how far it got. Without
#    one it execs the node supervisor at once, JOBRT_OCI_WATCHDOG=<pid>,<fd> naming the watchdog
#    and the pipe's read end.
# strict, never warnings: a warning would be a line on the task's stderr.
use strict;

my ($PRCTL, $SIGUSR1, $WATCHDOG, $dir, @w) = splice(@ARGV, 0, 9);
my ($PR_SET_PDEATHSIG, $PR_SET_CHILD_SUBREAPER) = (1, 36);
$ENV{JOBRT_OCI_SUBREAPER} = syscall($PRCTL, $PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 ? 1 : 0;
# Descriptors above $^F get close-on-exec: keep the pipe's ends across exec.
$^F = 255;
pipe(my $r, my $wr) or die "jobrt-oci: pipe: $!\n";
my $parent = $$;
my $pid = fork() // die "jobrt-oci: fork: $!\n";
if ($pid == 0) {
  close $r;
  delete $ENV{JOBRT_OCI_SUBREAPER};
  syscall($PRCTL, $PR_SET_PDEATHSIG, $SIGUSR1, 0, 0, 0);
  exit 0 if getppid() != $parent;
  setpgrp(0, 0);
  # Named jobrt-oci-watchdog in /proc/<pid>/cmdline: cleanup recognises it by that.
  exec { "/bin/sh" } "jobrt-oci-watchdog", $WATCHDOG, fileno($wr), @w;
  die "jobrt-oci: cannot run /bin/sh: $!\n";
}
close $wr;
$ENV{JOBRT_OCI_WATCHDOG} = "$pid," . fileno($r);
if (open(my $f, ">", "$dir/.watchdog.pid.$$")) {
  print $f "$pid\n";
  close $f;
  rename("$dir/.watchdog.pid.$$", "$dir/watchdog.pid");
}

if (shift(@ARGV) eq "1") {
  my ($start, $query, $kill, $delete, $tc, $tst, $tq, $td, $grace, $mark) = splice(@ARGV, 0, 10);
  $^F = 2;
  my @keep = @ENV{qw(JOBRT_OCI_SUBREAPER JOBRT_OCI_WATCHDOG)};
  delete @ENV{qw(JOBRT_OCI_SUBREAPER JOBRT_OCI_WATCHDOG JOBRT_OCI_RESUME)};
  my @sigs;
  $SIG{$_} = sub { push @sigs, $_[0] } for qw(TERM INT HUP);
  $SIG{CHLD} = sub {};
  my $now = sub { open(my $u, "<", "/proc/uptime") or return time; (split / /, scalar <$u>)[0] };
  my $say = sub { print STDERR "jobrt-oci: $_[0]\n" };
  my %resume;
  my $handover = sub {
    %resume = (%resume, @_);
    $resume{signalled} = "SIG$sigs[0]" if @sigs;
    @ENV{qw(JOBRT_OCI_SUBREAPER JOBRT_OCI_WATCHDOG)} = @keep;
    $ENV{JOBRT_OCI_RESUME} = join(";", map { "$_=$resume{$_}" } sort keys %resume);
    $SIG{$_} = "DEFAULT" for qw(TERM INT HUP CHLD);
    exec { $ARGV[0] } @ARGV;
    die "jobrt-oci: cannot run $ARGV[0]: $!\n";
  };
  my $capture = sub {
    my ($cmd, $limit) = @_;
    (pipe(my $or, my $ow) && pipe(my $er, my $ew)) or return {};
    my $p = fork();
    return {} unless defined $p;
    if ($p == 0) {
      setpgrp(0, 0);
      $SIG{$_} = "DEFAULT" for qw(TERM INT HUP CHLD);
      open(STDIN, "<", "/dev/null"); open(STDOUT, ">&", $ow); open(STDERR, ">&", $ew);
      exec { "/bin/sh" } "/bin/sh", "-c", $cmd;
      exit 127;
    }
    close $ow; close $ew;
    my %fh = (out => $or, err => $er);
    my %buf = (out => "", err => "");
    my $end = $now->() + $limit / 1000;
    my ($st, $drain);
    for (;;) {
      if (!defined $st && waitpid($p, 1) == $p) { $st = $?; $drain = $now->() + 0.25; }
      last if defined $st && (!%fh || $now->() > $drain);
      if (!defined $st && $now->() > $end) { kill "KILL", -$p; waitpid($p, 0); return { timeout => 1 }; }
      my $rin = "";
      vec($rin, fileno($_), 1) = 1 for values %fh;
      next unless select(my $rout = $rin, undef, undef, %fh ? 0.1 : 0.01) > 0;
      for my $k (keys %fh) {
        next unless vec($rout, fileno($fh{$k}), 1);
        if (sysread($fh{$k}, my $b, 65536)) { $buf{$k} .= $b if length($buf{$k}) < 1048576; }
        else { close delete $fh{$k}; }
      }
    }
    return { code => ($st & 127) ? undef : $st >> 8, sig => $st & 127, out => $buf{out}, err => $buf{err} };
  };

  # 1. RunTimeCreate's status from the watchdog.
  my $end = $now->() + $tc / 1000;
  my $text = "";
  for (;;) {
    my $left = $end - $now->();
    if ($left <= 0) { kill "KILL", -$pid; $handover->(create => "timeout"); }
    my $rin = "";
    vec($rin, fileno($r), 1) = 1;
    next unless select(my $rout = $rin, undef, undef, $left > 1 ? 1 : $left) > 0;
    last unless sysread($r, my $b, 64);
    $text .= $b;
  }
  close $r;
  $handover->(create => "lost") unless $text =~ /^(\d+)\n/;
  $handover->(create => $1) if $1 != 0 || @sigs;
  # From here on node must never read the (closed) report pipe: every hand-over says create=0.
  $resume{create} = 0;

  # 2. One query: a plain "created" with a pid, or node takes over (and polls as it does).
  my $q = $capture->($query, $tq);
  $handover->(create => 0, query => "timeout") if $q->{timeout};
  my $out = defined $q->{code} && $q->{code} == 0 ? $q->{out} : "";
  my @status = $out =~ /"status"\s*:\s*"([^"\\]*)"/g;
  my @cpid = $out =~ /"pid"\s*:\s*(\d+)/g;
  $handover->(create => 0) unless @status == 1 && $status[0] eq "created" && @cpid == 1 && $cpid[0] > 0;
  my $cpid = $cpid[0];
  require Fcntl;
  my $tmp = "$dir/.container.pid.$$.tmp";
  if (sysopen(my $f, $tmp, Fcntl::O_WRONLY() | Fcntl::O_CREAT() | Fcntl::O_EXCL() | Fcntl::O_NOFOLLOW(), 0600)) {
    print $f "$cpid\n";
    (close($f) && rename($tmp, "$dir/container.pid")) or unlink $tmp;
  }
  my $ppid = -1;
  if (open(my $s, "<", "/proc/$cpid/stat")) { my $l = <$s>; $ppid = (split / /, substr($l, rindex($l, ")") + 2))[1]; }
  $handover->(create => 0) if @sigs || $keep[0] ne "1" || $ppid != $$;
  s/\Q$mark\E/$cpid/g for $start, $kill, $delete;

  # 3. RunTimeStart with the task's stdio, and the init's exit (it may come first).
  my $sp = fork();
  $handover->(create => 0) unless defined $sp;
  if ($sp == 0) { $SIG{$_} = "DEFAULT" for qw(TERM INT HUP CHLD); exec { "/bin/sh" } "/bin/sh", "-c", $start; exit 127; }
  my $send = $now->() + $tst / 1000;
  my ($sst, $cst, $killat, $armed, $fwd) = (undef, undef, undef, 0, 0);
  for (;;) {
    $sst = $? if !defined $sst && waitpid($sp, 1) == $sp;
    if (!defined $cst) { my $w = waitpid($cpid, 1); $cst = $w == $cpid ? $? : $w < 0 ? -1 : undef; }
    if (!defined $sst && $now->() > $send) { kill "KILL", $sp; waitpid($sp, 0); $handover->(pid => $cpid, start => "timeout"); }
    while ($fwd < @sigs) {
      $fwd++;
      my $k = fork();
      if (defined $k && $k == 0) { setpgrp(0, 0); open(STDIN, "<", "/dev/null"); open(STDOUT, ">", "/dev/null"); open(STDERR, ">", "/dev/null"); exec { "/bin/sh" } "/bin/sh", "-c", $kill; exit 127; }
      $killat = $now->() + $grace / 1000 unless $armed++;
    }
    if (defined $killat && $now->() >= $killat) { kill "KILL", $cpid unless defined $cst; $killat = undef; }
    if (defined $sst && $sst != 0) { $handover->(pid => $cpid, start => ($sst & 127) ? "sig" . ($sst & 127) : $sst >> 8); }
    last if defined $sst && defined $cst;
    select(undef, undef, undef, 0.1);
  }
  $handover->(pid => $cpid, start => 0, exit => "unknown") if $cst < 0;

  # 4. Delete, end the watchdog, exit as the container did.
  if ($delete ne "") {
    my $d = $capture->($delete, $td);
    if ($d->{timeout}) { $say->("RunTimeDelete: RunTimeDelete did not finish within " . ($td / 1000) . " s and was killed: $delete"); }
    elsif (!exists $d->{out}) { $say->("RunTimeDelete: RunTimeDelete: cannot start /bin/sh: $!"); }
    elsif (!defined $d->{code} || $d->{code} != 0) {
      my $how = $d->{code};
      if (!defined $how) { require Config; $how = "SIG" . (split " ", $Config::Config{sig_name})[$d->{sig}]; }
      (my $e = $d->{err}) =~ s/^\s+|\s+$//g;
      $say->("RunTimeDelete exited with status $how: $e");
    }
  }
  kill "KILL", -$pid;
  $SIG{$_} = "DEFAULT" for qw(TERM INT HUP CHLD);
  if (my $n = $cst & 127) { kill $n, $$; exit 128 + $n; }
  exit(($cst >> 8) & 255);
}
exec { $ARGV[0] } @ARGV;
die "jobrt-oci: cannot run $ARGV[0]: $!\n";
