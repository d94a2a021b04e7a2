#!/bin/sh
# A local Slurm cluster on this one machine, for jobrt's tests and for trying jobrt under Slurm.
#
#   scripts/slurm-local.sh start [--nodes N] [--dir DIR] [--jobrt CMD] [--proctrack linuxproc|cgroup]
#                                [--gpus N --gpu-files FILES]  (N GPUs per node: GRES gpu, gres.conf File=FILES)
#                                [--constrain-devices]  (task/cgroup, cgroup.conf ConstrainDevices=yes)
#                                [--plugstack FILE]  (slurm.conf PlugStackConfig=FILE: SPANK plugins)
#                                                      (default: 2 nodes, /tmp/jobrt-slurm, linuxproc)
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
# munged, if any, is left alone), state, spool, pid and log files, and DIR/created: one line per
# daemon (pid and start time), namespace (inode) and link (ifindex) this script made, written as it
# makes them. `stop` acts only on what DIR/created names and what is still that very thing (a
# reused pid, or a namespace or bridge of the same name made by someone else, is left alone), and
# refuses a DIR without that file. The cluster's Epilog runs `jobrt gc --job $SLURM_JOB_ID` on
# every node of an ending job (CMD from --jobrt, default `jobrt` on PATH). Needs root.
set -eu

PROG=slurm-local.sh
DIR=${JOBRT_SLURM_DIR:-/tmp/jobrt-slurm}
NODES=2
KEEP_LOGS=0
JOBRT=jobrt
PROCTRACK=linuxproc
GPUS=0
GPU_FILES=
CONSTRAIN_DEVICES=0
PLUGSTACK=
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
  sed -n '4,9p' "$0" | sed 's/^# \{0,1\}//' >&2
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
    --jobrt) [ $# -ge 2 ] || bad_usage "--jobrt needs a command"; JOBRT=$2; shift 2 ;;
    --jobrt=*) JOBRT=${1#--jobrt=}; shift ;;
    --proctrack) [ $# -ge 2 ] || bad_usage "--proctrack needs linuxproc or cgroup"; PROCTRACK=$2; shift 2 ;;
    --proctrack=*) PROCTRACK=${1#--proctrack=}; shift ;;
    --gpus) [ $# -ge 2 ] || bad_usage "--gpus needs a number"; GPUS=$2; shift 2 ;;
    --gpu-files) [ $# -ge 2 ] || bad_usage "--gpu-files needs device files (gres.conf File= syntax)"; GPU_FILES=$2; shift 2 ;;
    --constrain-devices) CONSTRAIN_DEVICES=1; shift ;;
    --plugstack) [ $# -ge 2 ] || bad_usage "--plugstack needs a plugstack.conf"; PLUGSTACK=$2; shift 2 ;;
    --plugstack=*) PLUGSTACK=${1#--plugstack=}; shift ;;
    -h|--help) usage ;;
    *) bad_usage "unknown option $1 (see $0 --help)" ;;
  esac
done
case $NODES in
  ''|*[!0-9]*) bad_usage "--nodes $NODES: must be a whole number from 1 to 26" ;;
esac
[ "$NODES" -ge 1 ] && [ "$NODES" -le 26 ] || bad_usage "--nodes $NODES: must be a whole number from 1 to 26"
case $GPUS in
  ''|*[!0-9]*) bad_usage "--gpus $GPUS: must be a whole number" ;;
esac
# Fake GPUs for jobrt's device tests: any character device files (docs/devices.md).
case $GPU_FILES in
  '') [ "$GPUS" = 0 ] || bad_usage "--gpus $GPUS needs --gpu-files" ;;
  /*[!-A-Za-z0-9_./,\[\]]*|[!/]*) bad_usage "--gpu-files $GPU_FILES: an absolute path (letters, digits, _./-, and [a-b] ranges)" ;;
esac
case $PROCTRACK in
  linuxproc|cgroup) ;;
  *) bad_usage "--proctrack $PROCTRACK: must be linuxproc or cgroup" ;;
esac
# The Epilog quotes CMD in single quotes; a bare name is looked up on the Epilog's PATH.
case $JOBRT in
  ''|*[!-A-Za-z0-9_./+@=:,]*) bad_usage "--jobrt $JOBRT: give an absolute path or a command name (letters, digits and _./+@=:,- only)" ;;
  /*) [ -f "$JOBRT" ] && [ -x "$JOBRT" ] || bad_usage "--jobrt $JOBRT: not an executable file" ;;
  */*) bad_usage "--jobrt $JOBRT: give an absolute path or a command name" ;;
esac
# slurm.conf takes the path as it is: no spaces, and absolute, since every daemon and srun read it.
case $PLUGSTACK in
  '') ;;
  /*[!-A-Za-z0-9_./]*|[!/]*) bad_usage "--plugstack $PLUGSTACK: an absolute path (letters, digits and _./- only)" ;;
  *) [ -f "$PLUGSTACK" ] || bad_usage "--plugstack $PLUGSTACK: not a file" ;;
esac
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
CREATED=$DIR/created
LOGS=$DIR/log

# Root runs DIR/epilog on every node and acts on what DIR/created names: both must be root's (or
# the caller's) and writable by no one else, or another user could plant them (/tmp is shared).
dir_is_safe() {
  [ -e "$DIR" ] || [ -L "$DIR" ] || return 0
  for f in "$DIR" "$CREATED"; do
    [ "$f" = "$DIR" ] || [ -e "$f" ] || [ -L "$f" ] || continue
    [ ! -L "$f" ] || return 1
    owner=$(stat -c %u "$f") || return 1
    [ "$owner" = 0 ] || [ "$owner" = "$(id -u)" ] || return 1
    case $(stat -c %A "$f") in ?????w????|????????w?) return 1 ;; esac
  done
  [ -d "$DIR" ] && { [ ! -e "$CREATED" ] || [ -f "$CREATED" ]; }
}
check_dir() {
  dir_is_safe || die "$DIR: not a directory owned by root (or you) and writable by no one else (nor is $CREATED); refusing to use it"
}

node_name() { # 0 -> nodea, 1 -> nodeb, ...
  printf "node\\$(printf '%03o' $((97 + $1)))"
}

# DIR/created: "pid NAME PID START", "netns NAME INODE", "link NAME IFINDEX", one line per thing
# made, appended at once, so even a start that died half-way left a record of what it made.
record() { echo "$*" >>"$CREATED"; }
recorded() { # kind name -> the rest of the last line for it
  [ -f "$CREATED" ] || return 0
  awk -v k="$1" -v n="$2" '$1 == k && $2 == n { v = ""; for (i = 3; i <= NF; i++) v = v (i > 3 ? " " : "") $i } END { if (v != "") print v }' "$CREATED"
}
recorded_names() { # kind -> every recorded name of that kind, once, in the order made
  [ -f "$CREATED" ] || return 0
  awk -v k="$1" '$1 == k && !seen[$2]++ { print $2 }' "$CREATED"
}
read_pid() { recorded pid "$1" | cut -d' ' -f1; }

proc_field() { # pid field-after-comm (1 = state, 20 = start time)
  [ -r "/proc/$1/stat" ] || return 1
  sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f"$2"
}

# The recorded daemon still runs: same pid, same start time (so not a reused pid), not a zombie.
# Sets $pid.
same_process() { # name
  rec=$(recorded pid "$1")
  pid=${rec%% *}
  start=${rec#* }
  [ -n "$rec" ] && [ "$pid" != "$rec" ] || return 1
  state=$(proc_field "$pid" 1) || return 1
  [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ] || return 1
  [ "$(proc_field "$pid" 20)" = "$start" ]
}

# ...and, once its exec is done, runs the expected program with our slurm.conf (or munge socket).
pid_is_ours() { # name program
  same_process "$1" || return 1
  cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  case $cmdline in
    *"$2"*"$DIR/"*) return 0 ;;
  esac
  return 1
}

# Started in the background: record its pid and start time before anything else happens.
record_pid() { # name pid
  start=$(proc_field "$2" 20) || start=-
  record pid "$1" "$2" "${start:--}"
}

netns_inode() { stat -L -c %i "/run/netns/$1" 2>/dev/null || true; }
link_index() { cat "/sys/class/net/$1/ifindex" 2>/dev/null || true; }
# A namespace or link is ours only while it is the very one we made (same inode / ifindex).
netns_is_ours() { r=$(recorded netns "$1"); [ -n "$r" ] && [ "$(netns_inode "$1")" = "$r" ]; }
link_is_ours() { r=$(recorded link "$1"); [ -n "$r" ] && [ "$(link_index "$1")" = "$r" ]; }

# Daemon name -> program name, for the /proc check.
program_of() {
  case $1 in
    munged) echo munged ;;
    slurmctld) echo slurmctld ;;
    slurmd-*) echo slurmd ;;
  esac
}

daemons() { # every daemon this script recorded, in stop order
  recorded_names pid | grep '^slurmd-' || true
  echo slurmctld
  echo munged
}

stop_pid() { # name: SIGTERM, wait up to 10 s, then SIGKILL
  prog=$(program_of "$1")
  if pid_is_ours "$1" "$prog"; then
    kill -TERM "$pid" 2>/dev/null || true
    i=0
    while pid_is_ours "$1" "$prog" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    if pid_is_ours "$1" "$prog"; then
      echo "$PROG: $1 (pid $pid) ignored SIGTERM for 10 s; sending SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
}

# Only what DIR/created names, and only while it is still that very namespace or link.
remove_network() {
  for ns in $(recorded_names netns); do
    if netns_is_ours "$ns"; then
      ip netns del "$ns" 2>/dev/null || true
    elif [ -e "/run/netns/$ns" ]; then
      echo "$PROG: left network namespace $ns alone: it is not the one this cluster made" >&2
    fi
  done
  # Deleting a namespace deletes its veth end and so the peer; a half-made pair may remain.
  # The bridge goes last.
  for link in $(recorded_names link | grep -vx "$BRIDGE"; recorded_names link | grep -x "$BRIDGE"); do
    if link_is_ours "$link"; then
      ip link del "$link" 2>/dev/null || true
    elif [ -n "$(link_index "$link")" ]; then
      echo "$PROG: left link $link alone: it is not the one this cluster made" >&2
    fi
  done
}

# task/cgroup leaves the devices cgroups of the last jobs (slurm_<node>/uid_U/job_J/...) once its
# slurmd is gone; rmdir removes each that no process is in, deepest first.
remove_device_cgroups() {
  [ "$(cat "$DIR/constraindevices" 2>/dev/null)" = 1 ] || return 0
  n=$(cat "$DIR/nodes" 2>/dev/null || echo 0)
  case $n in ''|*[!0-9]*) n=0 ;; esac
  k=0
  while [ $k -lt "$n" ]; do
    top=/sys/fs/cgroup/devices/slurm_$(node_name $k)
    [ ! -d "$top" ] || find "$top" -depth -type d -exec rmdir {} + 2>/dev/null || true
    k=$((k + 1))
  done
}

slurm_env() { SLURM_CONF=$CONF "$@"; }

# Stops the cluster DIR/created describes. "strict" (the stop command): refuse when DIR holds no
# cluster. Otherwise (start, clearing a run that died) there is then simply nothing to clear.
do_stop() {
  if [ ! -f "$CREATED" ]; then
    [ "${1:-}" != strict ] || { echo "$PROG: no cluster in $DIR ($CREATED is missing); nothing stopped" >&2; exit 3; }
    return 0
  fi
  if [ -f "$CONF" ] && pid_is_ours slurmctld slurmctld; then
    # Jobs first, so no slurmstepd or task outlives the cluster that started it.
    if [ -n "$(slurm_env squeue -h -o %i 2>/dev/null)" ]; then
      slurm_env scancel --full --quiet --user=root 2>/dev/null || true
      slurm_env scancel --quiet $(slurm_env squeue -h -o %i 2>/dev/null) 2>/dev/null || true
      i=0
      while [ -n "$(slurm_env squeue -h -o %i 2>/dev/null)" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
    fi
  fi
  for d in $(daemons); do stop_pid "$d"; done
  remove_device_cgroups
  remove_network
  # Only what start made: --dir may name a directory that holds other things too.
  rm -rf "$CONF" "$DIR/cgroup.conf" "$DIR/epilog" "$DIR/state" "$DIR/spool" "$DIR/tmp" "$DIR/munge" "$DIR/nodes" "$DIR/proctrack" "$DIR/gpus" "$DIR/gres.conf" "$DIR/constraindevices" "$DIR/plugstack" "$DIR"/run-*.pid
  [ "$KEEP_LOGS" = 1 ] || rm -rf "$LOGS"
  rm -f "$CREATED"
  rmdir "$DIR" 2>/dev/null || true
  [ "$(cat "$OWNER_FILE" 2>/dev/null)" != "$DIR" ] || rm -f "$OWNER_FILE"
}

# True when every daemon, namespace and link the cluster needs is the one this script recorded.
# With "verbose", one line per item (status).
check_cluster() {
  verbose=${1:-}
  ok=0
  n=$(cat "$DIR/nodes" 2>/dev/null || echo 0)
  case $n in ''|*[!0-9]*) n=0 ;; esac
  [ "$n" -ge 1 ] || { [ -z "$verbose" ] || echo "  node count: missing ($DIR/nodes)"; ok=1; }
  names="munged slurmctld"
  k=0
  while [ $k -lt "$n" ]; do names="$names slurmd-$(node_name $k)"; k=$((k + 1)); done
  for d in $names; do
    if pid_is_ours "$d" "$(program_of "$d")"; then
      [ -z "$verbose" ] || echo "  $d: running, pid $pid"
    else
      ok=1
      rec=$(read_pid "$d")
      [ -z "$verbose" ] || echo "  $d: not running${rec:+ (recorded pid $rec is gone or another process)}"
    fi
  done
  k=1
  while [ $k -lt "$n" ]; do
    ns=$NS_PREFIX$(node_name $k)
    if netns_is_ours "$ns"; then
      [ -z "$verbose" ] || echo "  network namespace: $ns"
    else
      ok=1
      [ -z "$verbose" ] || echo "  network namespace $ns: missing (or not the one this cluster made)"
    fi
    k=$((k + 1))
  done
  if [ "$n" -gt 1 ]; then
    if link_is_ours "$BRIDGE"; then
      [ -z "$verbose" ] || echo "  bridge: $BRIDGE"
    else
      ok=1
      [ -z "$verbose" ] || echo "  bridge $BRIDGE: missing (or not the one this cluster made)"
    fi
  fi
  return $ok
}

all_running() { [ -f "$CONF" ] && [ -f "$CREATED" ] && check_cluster; }

do_status() {
  if [ ! -f "$CREATED" ]; then
    echo "no cluster in $DIR"
    return 3
  fi
  echo "cluster dir: $DIR ($(cat "$DIR/nodes" 2>/dev/null || echo '?') nodes)"
  if check_cluster verbose && [ -f "$CONF" ]; then
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
  if [ "$CONSTRAIN_DEVICES" = 1 ]; then task=cgroup; else task=none; fi
  mkdir -p "$DIR/state" "$DIR/spool" "$LOGS"
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
# Each node its own TmpFS: PMIx puts its rendezvous directories there, and two slurmd on one
# machine sharing /tmp would collide on them (docs/slurm.md, MPI).
TmpFS=$DIR/tmp/%n
SlurmctldPidFile=$DIR/run-slurmctld.pid
SlurmdPidFile=$DIR/run-slurmd-%n.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/$PROCTRACK
TaskPlugin=task/$task
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
# Removes what a SIGKILLed jobrt exec left on a node once its job ends (docs/slurm.md).
Epilog=$DIR/epilog
# Slurm's KillWait must exceed jobrt.conf KillWait, so jobrt's cleanup finishes before SIGKILL.
KillWait=10
MinJobAge=2
InactiveLimit=0
SlurmdTimeout=60
TreeWidth=65533
EOF
  gres=
  if [ "$GPUS" -gt 0 ]; then
    echo "GresTypes=gpu" >>"$CONF"
    gres=" Gres=gpu:$GPUS"
    echo "Name=gpu File=$GPU_FILES" >"$DIR/gres.conf"
  fi
  k=0
  names=
  while [ $k -lt "$NODES" ]; do
    name=$(node_name $k)
    if [ $k -eq 0 ]; then
      echo "NodeName=$name NodeAddr=$ctld_addr NodeHostname=$host CPUs=$cpus$gres State=UNKNOWN" >>"$CONF"
    else
      echo "NodeName=$name NodeAddr=$NET.$((k + 1)) NodeHostname=$name CPUs=$cpus$gres State=UNKNOWN" >>"$CONF"
    fi
    names=${names:+$names,}$name
    k=$((k + 1))
  done
  echo "PartitionName=debug Nodes=$names Default=YES MaxTime=INFINITE State=UP" >>"$CONF"
  # This machine mounts cgroup v1 hierarchies; on a v2-only host use Slurm's v2 plugin.
  if [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = cgroup2fs ]; then cg=cgroup/v2; else cg=cgroup/v1; fi
  printf 'CgroupPlugin=%s\nCgroupAutomount=no\n' "$cg" >"$DIR/cgroup.conf"
  # Every process of a step, whatever runtime it starts, is then held to the step's GRES device
  # files: Slurm denies the node's others in the step's devices cgroup (docs/devices.md).
  [ "$CONSTRAIN_DEVICES" = 0 ] || echo "ConstrainDevices=yes" >>"$DIR/cgroup.conf"
  echo "$CONSTRAIN_DEVICES" >"$DIR/constraindevices"
  [ -z "$PLUGSTACK" ] || echo "PlugStackConfig=$PLUGSTACK" >>"$CONF"
  echo "$PLUGSTACK" >"$DIR/plugstack"
  echo "$NODES" >"$DIR/nodes"
  echo "$PROCTRACK" >"$DIR/proctrack"
  echo "$GPUS $GPU_FILES" >"$DIR/gpus"
  write_epilog
}

# Rewritten by every start, also of a running cluster (slurmd runs the file afresh at each job
# end), so --jobrt takes effect at once.
write_epilog() {
  cat >"$DIR/epilog.tmp" <<EPILOG
#!/bin/sh
# Written by scripts/slurm-local.sh start. slurmd runs it as root on each node of a job once the
# job has ended there: it removes what a SIGKILLed jobrt exec of that job left on this node
# (containers, spool files, task processes). A non-zero exit drains the node (Slurm's rule for a
# failed Epilog): something was left that an admin should look at.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
# A node without jobrt has no jobrt records either.
command -v '$JOBRT' >/dev/null 2>&1 || exit 0
exec '$JOBRT' gc --job "\$SLURM_JOB_ID" >>'$LOGS'/epilog-"\$SLURMD_NODENAME".log 2>&1
EPILOG
  chmod 755 "$DIR/epilog.tmp"
  mv "$DIR/epilog.tmp" "$DIR/epilog"
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
  record_pid munged $!
  i=0
  until [ -S "$DIR/munge/munge.socket" ] && munge -S "$DIR/munge/munge.socket" -n </dev/null | unmunge -S "$DIR/munge/munge.socket" >/dev/null 2>&1; do
    i=$((i + 1))
    [ $i -lt 100 ] && same_process munged ||
      { cat "$DIR/munge/munged.log" "$LOGS/munged.out" >&2 2>/dev/null || true; die "munged did not start"; }
    sleep 0.1
  done
}

make_network() {
  [ "$NODES" -gt 1 ] || return 0
  if ip -4 -o addr show | grep -v " $BRIDGE " | grep -q " inet $NET\\."; then
    die "$NET.0/24 is already used on this machine; choose another with JOBRT_SLURM_NET (e.g. 10.250.3)"
  fi
  [ -z "$(link_index "$BRIDGE")" ] ||
    die "a link $BRIDGE exists that this cluster did not make (another local cluster: see $OWNER_FILE; or a leftover: ip link del $BRIDGE)"
  ip link add "$BRIDGE" type bridge
  record link "$BRIDGE" "$(link_index "$BRIDGE")"
  ip addr add "$NET.1/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  k=1
  while [ $k -lt "$NODES" ]; do
    name=$(node_name $k)
    ns=$NS_PREFIX$name
    [ ! -e "/run/netns/$ns" ] ||
      die "a network namespace $ns exists that this cluster did not make (another local cluster: see $OWNER_FILE; or a leftover: ip netns del $ns)"
    ip netns add "$ns"
    record netns "$ns" "$(netns_inode "$ns")"
    ip link add "jrtv-$name" type veth peer name "jrtp-$name"
    record link "jrtv-$name" "$(link_index "jrtv-$name")"
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
  record_pid slurmctld $!
  i=0
  until scontrol ping 2>/dev/null | grep -q 'is UP'; do
    i=$((i + 1))
    [ $i -lt 200 ] && same_process slurmctld ||
      { tail -n 20 "$LOGS/slurmctld.log" "$LOGS/slurmctld.out" >&2 2>/dev/null || true; die "slurmctld did not come up"; }
    sleep 0.1
  done
  k=0
  while [ $k -lt "$NODES" ]; do
    name=$(node_name $k)
    mkdir -p "$DIR/spool/$name" "$DIR/tmp/$name"
    chmod 1777 "$DIR/tmp/$name"
    if [ $k -eq 0 ]; then
      setsid slurmd -D -N "$name" -f "$CONF" </dev/null >>"$LOGS/slurmd-$name.out" 2>&1 9>&- &
    else
      # nsenter keeps the host's /sys (and its cgroup mounts), unlike `ip netns exec`; exec makes
      # the recorded pid slurmd's own.
      setsid nsenter --net="/run/netns/$NS_PREFIX$name" unshare --uts \
        sh -c 'hostname "$1"; shift; exec "$@"' sh "$name" slurmd -D -N "$name" -f "$CONF" \
        </dev/null >>"$LOGS/slurmd-$name.out" 2>&1 9>&- &
    fi
    record_pid "slurmd-$name" $!
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
      same_process "$d" ||
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
  if all_running && [ "$(cat "$DIR/nodes")" = "$NODES" ] && [ "$(cat "$DIR/proctrack" 2>/dev/null)" = "$PROCTRACK" ] && [ "$(cat "$DIR/gpus" 2>/dev/null)" = "$GPUS $GPU_FILES" ] && [ "$(cat "$DIR/constraindevices" 2>/dev/null)" = "$CONSTRAIN_DEVICES" ] && [ "$(cat "$DIR/plugstack" 2>/dev/null)" = "$PLUGSTACK" ]; then
    write_epilog
    echo "$PROG: already running in $DIR"
    echo "export SLURM_CONF=$CONF"
    return 0
  fi
  other=$(cat "$OWNER_FILE" 2>/dev/null || true)
  if [ -n "$other" ] && [ "$other" != "$DIR" ] && JOBRT_SLURM_DIR=$other sh "$0" status >/dev/null 2>&1; then
    die "another local cluster runs in $other; stop it first: $0 stop --dir $other"
  fi
  ensure_installed
  [ "$CONSTRAIN_DEVICES" = 0 ] || devices_controller_mounted ||
    die "--constrain-devices: no devices cgroup controller is mounted under /sys/fs/cgroup (cgroup v1: a hierarchy with the devices controller; or cgroup v2)"
  # A previous run may have died half-way: its daemons, namespaces and files go first.
  do_stop
  mkdir -p "$DIR"
  : >"$CREATED"
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

# Slurm's cgroup/v1 plugin finds each controller at /sys/fs/cgroup/<name> (CgroupMountpoint);
# cgroup/v2 constrains devices with eBPF on the unified hierarchy.
devices_controller_mounted() {
  [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = cgroup2fs ] && return 0
  awk '$2 == "/sys/fs/cgroup/devices" && $3 == "cgroup" && $4 ~ /(^|,)devices(,|$)/ { found = 1 } END { exit !found }' /proc/mounts
}

take_lock() {
  exec 9>>"$LOCK_FILE"
  flock -w 300 9 || die "another slurm-local.sh start or stop has held $LOCK_FILE for 300 s"
}

case $cmd in
  start) check_dir; take_lock; do_start ;;
  stop) check_dir; take_lock; do_stop strict ;;
  status) check_dir; do_status ;;
  env) echo "export SLURM_CONF=$CONF" ;;
  -h|--help|help) usage ;;
  *) bad_usage "unknown command $cmd (start, stop, status, env)" ;;
esac
