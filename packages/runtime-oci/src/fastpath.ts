/**
 * The create/start fast path: the common case of the supervisor (supervisor.ts), done by the perl
 * that already starts it (watchdog.ts), so that no node process starts per task. Starting node
 * was most of create/start's cost over run mode (docs/performance.md, oci-modes).
 *
 * After the watchdog has run RunTimeCreate, the perl reads its status, runs RunTimeQuery once,
 * records the container's pid, runs RunTimeStart with the task's stdio, waits (as the container
 * init's subreaper, with waitpid) for the init to exit, runs RunTimeDelete and exits with the
 * init's status, exactly as the node supervisor does. It forwards SIGTERM/SIGINT/SIGHUP once the
 * container exists (RunTimeKill, then SIGKILL after the grace time).
 *
 * Anything else (a failed or timed-out command, a query that is not a plain `created` answer, a
 * signal before the container started, no subreaper, a pid not ours) is handed over: the perl
 * execs the node supervisor with JOBRT_OCI_RESUME saying how far it got, and node carries on
 * from there with its own messages and teardown. So every unusual path keeps one implementation.
 */

/** Marker the host writes for `%p` in the commands the fast path runs after the pid is known. */
export const PID_PLACEHOLDER = "\u0001jobrt-pid\u0001";

/** What the fast path runs: commands already expanded (with PID_PLACEHOLDER for `%p`). */
export interface FastPathSpec {
  start: string;
  query: string;
  kill: string;
  /** Empty when RunTimeDelete cannot be expanded here (node's teardown would not run it either). */
  delete: string;
  timeouts: { create: number; start: number; query: number; delete: number };
  graceMs: number;
}

/** How far the fast path got before it handed over (JOBRT_OCI_RESUME). */
export interface Resume {
  /** RunTimeCreate's exit status, or how it ended without one. */
  create?: number | "timeout" | "lost";
  /** RunTimeQuery (after a successful create) timed out. */
  query?: "timeout";
  /** The created container's pid (given with `start`). */
  pid?: number;
  /** RunTimeStart's result: exit status, `sig<N>`, or a time-out. */
  start?: number | `sig${number}` | "timeout";
  /** The init exited but its status could not be had. */
  exit?: "unknown";
  signalled?: NodeJS.Signals;
}

/** The perl arguments for the fast path (after the watchdog's), or the one that says "none". */
export function fastPathArgs(spec: FastPathSpec | undefined): string[] {
  if (!spec) return ["0"];
  const t = spec.timeouts;
  return [
    "1",
    spec.start,
    spec.query,
    spec.kill,
    spec.delete,
    ...[t.create, t.start, t.query, t.delete, spec.graceMs].map(String),
    PID_PLACEHOLDER,
  ];
}

/** JOBRT_OCI_RESUME as the fast path writes it (`key=value;...`); undefined for anything else. */
export function parseResume(text: string | undefined): Resume | undefined {
  if (!text) return undefined;
  const r: Resume = {};
  for (const item of text.split(";")) {
    const [key, value = ""] = item.split("=", 2);
    const n = /^\d+$/.test(value) ? Number(value) : undefined;
    if (key === "create" && (n !== undefined || value === "timeout" || value === "lost"))
      r.create = n ?? (value as "timeout" | "lost");
    else if (key === "query" && value === "timeout") r.query = value;
    else if (key === "pid" && n !== undefined && n > 0) r.pid = n;
    else if (key === "start" && (n !== undefined || value === "timeout" || /^sig\d+$/.test(value)))
      r.start = n ?? (value as "timeout");
    else if (key === "exit" && value === "unknown") r.exit = value;
    else if (key === "signalled" && /^SIG[A-Z]+$/.test(value)) r.signalled = value as NodeJS.Signals;
    else return undefined;
  }
  return r;
}

/**
 * The perl, run after the watchdog fork (watchdog.ts) with `$pid` (the watchdog), `$r` (its
 * report pipe) and `$dir` (the task dir) set, and @ARGV starting with fastPathArgs(). Only
 * perl-base modules (Debian's Essential perl): no Time::HiRes, so time comes from /proc/uptime.
 * A signal interrupts select(), so SIGCHLD ends a wait at once; the 0.1 s cap covers the moment
 * between a check and the next select.
 */
export const FAST_PATH = String.raw`
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
`;
