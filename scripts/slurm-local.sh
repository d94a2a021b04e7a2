#!/bin/sh
# A local Slurm cluster on this one machine, for jobrt's tests and for trying jobrt under Slurm.
#
#   scripts/slurm-local.sh start [--nodes N] [--dir DIR]   (default: 2 nodes, /tmp/jobrt-slurm)
#   scripts/slurm-local.sh stop  [--dir DIR] [--keep-logs]
#   scripts/slurm-local.sh status [--dir DIR]
#   scripts/slurm-local.sh env   [--dir DIR]                (prints the export line)
#
# Node "nodea" runs in the host's namespaces. Every further node ("nodeb", "nodec", ...) is its own
# test host: a network namespace joined to a private bridge (JOBRT_SLURM_NET, default
# 10.250.2.0/24, host end .1, node k at .k+1; no default route, no forwarding, so nothing outside
# this machine is ever addressed) and a UTS namespace with its own hostname. Heterogeneous jobs need
# that: Slurm places each component on a different node.
#
# Everything lives under DIR: slurm.conf, cgroup.conf, a munge key and socket of its own (a system
# munged, if any, is left alone), state, spool, pid and log files. `stop` signals exactly the
# daemons this script started (pids recorded in DIR/pids, each checked against /proc before it is
# signalled), removes the namespaces and the bridge, then DIR. Needs root.
set -eu

PROG=slurm-local.sh
DIR=${JOBRT_SLURM_DIR:-/tmp/jobrt-slurm}
NODES=2
KEEP_LOGS=0
NET=${JOBRT_SLURM_NET:-10.250.2}
CTLD_PORT=${JOBRT_SLURM_CTLD_PORT:-16817}
SLURMD_PORT=${JOBRT_SLURM_SLURMD_PORT:-16818}
# Fixed names: namespaces and links are machine-wide, so one such cluster runs per machine.
BRIDGE=jrt-br0
NS_PREFIX=jobrt-slurm-
# Which DIR owns those machine-wide names right now.
OWNER_FILE=/run/jobrt-slurm-local.dir
# Serialises start and stop machine-wide (held on fd 9, which no daemon inherits).
LOCK_FILE=/run/jobrt-slurm-local.lock

die() { echo "$PROG: $*" >&2; exit 1; }
bad_usage() { echo "$PROG: $*" >&2; exit 2; }
usage() {
  sed -n '4,7p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

cmd=${1:-}
[ -n "$cmd" ] || usage
shift
while [ $# -gt 0 ]; do
  case $1 in
    --nodes) [ $# -ge 2 ] || bad_usage "--nodes needs a number"; NODES=$2; shift 2 ;;
    --nodes=*) NODES=${1#--nodes=}; shift ;;
    --dir) [ $# -ge 2 ] || bad_usage "--dir needs a directory"; DIR=$2; shift 2 ;;
    --dir=*) DIR=${1#--dir=}; shift ;;
    --keep-logs) KEEP_LOGS=1; shift ;;
    -h|--help) usage ;;
    *) bad_usage "unknown option $1 (see $0 --help)" ;;
  esac
done
case $NODES in
  ''|*[!0-9]*) bad_usage "--nodes $NODES: must be a whole number from 1 to 26" ;;
esac
[ "$NODES" -ge 1 ] && [ "$NODES" -le 26 ] || bad_usage "--nodes $NODES: must be a whole number from 1 to 26"
case $DIR in
  /*) ;;
  *) DIR=$(pwd)/$DIR ;;
esac
# Only a private range: these addresses exist solely between this host and its namespaces.
net_ok=0
case $NET in
  *[!0-9.]*|*.*.*.*|*..*|.*|*.) ;;
  10.*.*|192.168.*|172.1[6-9].*|172.2[0-9].*|172.3[01].*)
    o1=${NET%%.*}; rest=${NET#*.}; o2=${rest%%.*}; o3=${rest#*.}
    [ "$o1" -le 255 ] && [ "$o2" -le 255 ] && [ "$o3" -le 255 ] && net_ok=1 ;;
esac
[ $net_ok = 1 ] || bad_usage "JOBRT_SLURM_NET=$NET: give the first three octets of a private /24 (10.x.y, 172.16-31.y, 192.168.y), e.g. 10.250.2"

CONF=$DIR/slurm.conf
PIDS=$DIR/pids
LOGS=$DIR/log

node_name() { # 0 -> nodea, 1 -> nodeb, ...
  printf "node\\$(printf '%03o' $((97 + $1)))"
}

# A pid is ours only if it is alive and runs the expected program with our slurm.conf (or our
# munge socket): a stale pid file from a dead run may name a pid the system has reused.
pid_is_ours() { # pid program
  [ -n "$1" ] && [ -r "/proc/$1/cmdline" ] || return 1
  cmdline=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) || return 1
  case $cmdline in
    *"$2"*"$DIR/"*) return 0 ;;
  esac
  return 1
}

# For a daemon this run just started: alive and not a zombie. (pid_is_ours would race with the
# exec: until then the child's cmdline is this script's.)
alive() {
  [ -n "$1" ] && [ -r "/proc/$1/stat" ] || return 1
  state=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

read_pid() { [ -f "$PIDS/$1.pid" ] && cat "$PIDS/$1.pid" || true; }

# Daemon name -> program name, for the /proc check.
program_of() {
  case $1 in
    munged) echo munged ;;
    slurmctld) echo slurmctld ;;
    slurmd-*) echo slurmd ;;
  esac
}

daemons() { # every daemon this script may have started, in stop order
  for f in "$PIDS"/slurmd-*.pid; do [ -f "$f" ] && basename "$f" .pid; done
  echo slurmctld
  echo munged
}

stop_pid() { # name: SIGTERM, wait up to 10 s, then SIGKILL
  pid=$(read_pid "$1")
  prog=$(program_of "$1")
  if pid_is_ours "$pid" "$prog"; then
    kill -TERM "$pid" 2>/dev/null || true
    i=0
    while pid_is_ours "$pid" "$prog" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    if pid_is_ours "$pid" "$prog"; then
      echo "$PROG: $1 (pid $pid) ignored SIGTERM for 10 s; sending SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$PIDS/$1.pid"
}

remove_network() {
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    case $ns in
      "$NS_PREFIX"*) ip netns del "$ns" 2>/dev/null || true ;;
    esac
  done
  # Deleting a namespace deletes its veth end and so the peer; a half-made pair may remain.
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
    case $link in
      jrtv-*) ip link del "$link" 2>/dev/null || true ;;
    esac
  done
  ip link show "$BRIDGE" >/dev/null 2>&1 && ip link del "$BRIDGE" 2>/dev/null || true
}

slurm_env() { SLURM_CONF=$CONF "$@"; }

do_stop() {
  if [ -f "$CONF" ] && pid_is_ours "$(read_pid slurmctld)" slurmctld; then
    # Jobs first, so no slurmstepd or task outlives the cluster that started it.
    if [ -n "$(slurm_env squeue -h -o %i 2>/dev/null)" ]; then
      slurm_env scancel --full --quiet --user=root 2>/dev/null || true
      slurm_env scancel --quiet $(slurm_env squeue -h -o %i 2>/dev/null) 2>/dev/null || true
      i=0
      while [ -n "$(slurm_env squeue -h -o %i 2>/dev/null)" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
    fi
  fi
  for d in $(daemons); do stop_pid "$d"; done
  remove_network
  # Only what start made: --dir may name a directory that holds other things too.
  rm -rf "$CONF" "$DIR/cgroup.conf" "$DIR/state" "$DIR/spool" "$DIR/munge" "$PIDS" "$DIR/nodes" "$DIR"/run-*.pid
  [ "$KEEP_LOGS" = 1 ] || rm -rf "$LOGS"
  rmdir "$DIR" 2>/dev/null || true
  [ "$(cat "$OWNER_FILE" 2>/dev/null)" != "$DIR" ] || rm -f "$OWNER_FILE"
}

all_running() {
  [ -f "$CONF" ] || return 1
  pid_is_ours "$(read_pid munged)" munged || return 1
  pid_is_ours "$(read_pid slurmctld)" slurmctld || return 1
  n=$(cat "$DIR/nodes" 2>/dev/null || echo 0)
  [ "$n" -ge 1 ] || return 1
  k=0
  while [ $k -lt "$n" ]; do
    pid_is_ours "$(read_pid "slurmd-$(node_name $k)")" slurmd || return 1
    k=$((k + 1))
  done
}

do_status() {
  if [ ! -f "$CONF" ]; then
    echo "no cluster in $DIR"
    return 3
  fi
  echo "cluster dir: $DIR ($(cat "$DIR/nodes" 2>/dev/null || echo '?') nodes)"
  for d in munged slurmctld $(for f in "$PIDS"/slurmd-*.pid; do [ -f "$f" ] && basename "$f" .pid; done); do
    pid=$(read_pid "$d")
    if pid_is_ours "$pid" "$(program_of "$d")"; then echo "  $d: running, pid $pid"; else echo "  $d: not running"; fi
  done
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    case $ns in "$NS_PREFIX"*) echo "  network namespace: $ns" ;; esac
  done
  if all_running; then
    slurm_env sinfo -N -o '  %N %T %c' 2>&1 || true
    echo "export SLURM_CONF=$CONF"
    return 0
  fi
  return 1
}

ensure_installed() {
  missing=
  for p in slurmctld slurmd srun sbatch munged munge; do
    PATH=$PATH:/usr/sbin:/sbin command -v "$p" >/dev/null 2>&1 || missing="$missing $p"
  done
  [ -z "$missing" ] && return 0
  [ "$(id -u)" = 0 ] || die "missing$missing; install slurm-wlm and munge (needs root)"
  echo "$PROG: installing slurm-wlm and munge (missing:$missing)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q slurm-wlm munge >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null && apt-get install -y -q slurm-wlm munge >/dev/null; } ||
    die "apt-get install slurm-wlm munge failed"
}

write_conf() {
  host=$(hostname -s)
  cpus=$(nproc)
  if [ "$NODES" -gt 1 ]; then ctld_addr=$NET.1; else ctld_addr=127.0.0.1; fi
  mkdir -p "$DIR/state" "$DIR/spool" "$PIDS" "$LOGS"
  cat >"$CONF" <<EOF
# Written by scripts/slurm-local.sh; removed by its stop.
ClusterName=jobrt-local
SlurmctldHost=$host($ctld_addr)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run-slurmctld.pid
SlurmdPidFile=$DIR/run-slurmd-%n.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SwitchType=switch/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1
ReturnToService=2
# Slurm's KillWait must exceed jobrt.conf KillWait, so jobrt's cleanup finishes before SIGKILL.
KillWait=10
MinJobAge=2
InactiveLimit=0
SlurmdTimeout=60
TreeWidth=65533
EOF
  k=0
  names=
  while [ $k -lt "$NODES" ]; do
    name=$(node_name $k)
    if [ $k -eq 0 ]; then
      echo "NodeName=$name NodeAddr=$ctld_addr NodeHostname=$host CPUs=$cpus State=UNKNOWN" >>"$CONF"
    else
      echo "NodeName=$name NodeAddr=$NET.$((k + 1)) NodeHostname=$name CPUs=$cpus State=UNKNOWN" >>"$CONF"
    fi
    names=${names:+$names,}$name
    k=$((k + 1))
  done
  echo "PartitionName=debug Nodes=$names Default=YES MaxTime=INFINITE State=UP" >>"$CONF"
  # This machine mounts cgroup v1 hierarchies; on a v2-only host use Slurm's v2 plugin.
  if [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = cgroup2fs ]; then cg=cgroup/v2; else cg=cgroup/v1; fi
  printf 'CgroupPlugin=%s\nCgroupAutomount=no\n' "$cg" >"$DIR/cgroup.conf"
  echo "$NODES" >"$DIR/nodes"
}

start_munge() {
  mkdir -p "$DIR/munge"
  dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 2>/dev/null
  chmod 755 "$DIR/munge"
  chmod 400 "$DIR/munge/munge.key"
  chown -R munge:munge "$DIR/munge"
  # munged refuses group/world-writable parents without the sticky bit; DIR itself is ours.
  chmod 755 "$DIR"
  setpriv --reuid=munge --regid=munge --clear-groups \
    munged --foreground --socket="$DIR/munge/munge.socket" --key-file="$DIR/munge/munge.key" \
    --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/munge/munged.log" \
    --seed-file="$DIR/munge/munged.seed" </dev/null >>"$LOGS/munged.out" 2>&1 9>&- &
  echo $! >"$PIDS/munged.pid"
  i=0
  until [ -S "$DIR/munge/munge.socket" ] && munge -S "$DIR/munge/munge.socket" -n </dev/null | unmunge -S "$DIR/munge/munge.socket" >/dev/null 2>&1; do
    i=$((i + 1))
    [ $i -lt 100 ] && alive "$(read_pid munged)" ||
      { cat "$DIR/munge/munged.log" "$LOGS/munged.out" >&2 2>/dev/null || true; die "munged did not start"; }
    sleep 0.1
  done
}

make_network() {
  [ "$NODES" -gt 1 ] || return 0
  if ip -4 -o addr show | grep -v " $BRIDGE " | grep -q " inet $NET\\."; then
    die "$NET.0/24 is already used on this machine; choose another with JOBRT_SLURM_NET (e.g. 10.250.3)"
  fi
  ip link add "$BRIDGE" type bridge
  ip addr add "$NET.1/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  k=1
  while [ $k -lt "$NODES" ]; do
    name=$(node_name $k)
    ns=$NS_PREFIX$name
    ip netns add "$ns"
    ip link add "jrtv-$name" type veth peer name "jrtp-$name"
    ip link set "jrtp-$name" netns "$ns"
    ip link set "jrtv-$name" master "$BRIDGE"
    ip link set "jrtv-$name" up
    ip netns exec "$ns" ip link set lo up
    ip netns exec "$ns" ip link set "jrtp-$name" name eth0
    ip netns exec "$ns" ip addr add "$NET.$((k + 1))/24" dev eth0
    ip netns exec "$ns" ip link set eth0 up
    k=$((k + 1))
  done
}

start_slurm() {
  export SLURM_CONF="$CONF"
  setsid slurmctld -D -c -f "$CONF" </dev/null >>"$LOGS/slurmctld.out" 2>&1 9>&- &
  echo $! >"$PIDS/slurmctld.pid"
  i=0
  until scontrol ping 2>/dev/null | grep -q 'is UP'; do
    i=$((i + 1))
    [ $i -lt 200 ] && alive "$(read_pid slurmctld)" ||
      { tail -n 20 "$LOGS/slurmctld.log" "$LOGS/slurmctld.out" >&2 2>/dev/null || true; die "slurmctld did not come up"; }
    sleep 0.1
  done
  k=0
  while [ $k -lt "$NODES" ]; do
    name=$(node_name $k)
    mkdir -p "$DIR/spool/$name"
    if [ $k -eq 0 ]; then
      setsid slurmd -D -N "$name" -f "$CONF" </dev/null >>"$LOGS/slurmd-$name.out" 2>&1 9>&- &
    else
      # nsenter keeps the host's /sys (and its cgroup mounts), unlike `ip netns exec`; exec makes
      # the recorded pid slurmd's own.
      setsid nsenter --net="/run/netns/$NS_PREFIX$name" unshare --uts \
        sh -c 'hostname "$1"; shift; exec "$@"' sh "$name" slurmd -D -N "$name" -f "$CONF" \
        </dev/null >>"$LOGS/slurmd-$name.out" 2>&1 9>&- &
    fi
    echo $! >"$PIDS/slurmd-$name.pid"
    k=$((k + 1))
  done
}

wait_idle() {
  i=0
  while :; do
    states=$(sinfo -h -N -o '%N %T' 2>/dev/null | sort -u)
    idle=$(printf '%s\n' "$states" | grep -c ' idle$' || true)
    [ "$idle" -ge "$NODES" ] && return 0
    for d in $(daemons); do
      alive "$(read_pid "$d")" ||
        { tail -n 20 "$LOGS"/*.log "$LOGS"/*.out >&2 2>/dev/null || true; die "$d exited during start (logs above)"; }
    done
    i=$((i + 1))
    if [ $i -ge 300 ]; then
      echo "$states" >&2
      tail -n 20 "$LOGS"/*.log >&2 2>/dev/null
      die "nodes not idle after 30 s"
    fi
    sleep 0.1
  done
}

do_start() {
  [ "$(id -u)" = 0 ] || die "start needs root (it creates network namespaces and runs slurmd as root)"
  if all_running && [ "$(cat "$DIR/nodes")" = "$NODES" ]; then
    echo "$PROG: already running in $DIR"
    echo "export SLURM_CONF=$CONF"
    return 0
  fi
  other=$(cat "$OWNER_FILE" 2>/dev/null || true)
  if [ -n "$other" ] && [ "$other" != "$DIR" ] && JOBRT_SLURM_DIR=$other sh "$0" status >/dev/null 2>&1; then
    die "another local cluster runs in $other; stop it first: $0 stop --dir $other"
  fi
  ensure_installed
  # A previous run may have died half-way: its daemons, namespaces and files go first.
  do_stop
  echo "$DIR" >"$OWNER_FILE"
  trap 'echo "$PROG: start failed; cleaning up" >&2; KEEP_LOGS=1 do_stop' EXIT
  write_conf
  start_munge
  make_network
  start_slurm
  wait_idle
  trap - EXIT
  echo "$PROG: $NODES node(s) idle; logs in $LOGS"
  echo "export SLURM_CONF=$CONF"
}

take_lock() {
  exec 9>>"$LOCK_FILE"
  flock -w 300 9 || die "another slurm-local.sh start or stop has held $LOCK_FILE for 300 s"
}

case $cmd in
  start) take_lock; do_start ;;
  stop) take_lock; do_stop ;;
  status) do_status ;;
  env) echo "export SLURM_CONF=$CONF" ;;
  -h|--help|help) usage ;;
  *) bad_usage "unknown command $cmd (start, stop, status, env)" ;;
esac
