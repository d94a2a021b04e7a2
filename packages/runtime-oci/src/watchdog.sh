# The create/start watchdog (see watchdog.ts), started by createstart.pl as
# `sh watchdog.sh <fd> <create> <kill> <delete> <kill seconds> <delete seconds>` with $0 named
# jobrt-oci-watchdog, in its own process group, with SIGUSR1 as its parent-death signal. <fd> is
# the pipe on which it reports RunTimeCreate's exit status.
#
# A trap that only sets a flag lets the shell finish waiting for the foreground create; after it,
# the trap itself does the teardown, and it is installed before the flag is checked, so no signal
# can fall between a check and a wait. The commands run under `timeout` when coreutils has it.
fd=$1 create=$2 kill=$3 delete=$4 ks=$5 ds=$6 s= gone=; t=; command -v timeout >/dev/null 2>&1 && t="timeout -s KILL"
stop() { [ -n "$s" ] && kill "$s" 2>/dev/null; [ -z "$kill" ] || $t ${t:+$ks} /bin/sh -c "$kill" >/dev/null 2>&1; [ -z "$delete" ] || $t ${t:+$ds} /bin/sh -c "$delete" >/dev/null 2>&1; exit 0; }
trap 'gone=1' USR1
eval "/bin/sh -c \"\$create\" $fd>&-"; rc=$?
trap stop USR1
[ -z "$gone" ] || stop
# A supervisor that died makes the report's write fail: no SIGPIPE for that (create ran with the
# default disposition, which its container inherits).
trap '' PIPE
eval "echo $rc >&$fd" 2>/dev/null; eval "exec $fd>&-"; exec </dev/null >/dev/null
while :; do sleep 3600 & s=$!; wait $s; done
