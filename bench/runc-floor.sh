# The floor of a container step: the runtime processes alone, with nothing of jobrt or Slurm.
#   sh runc-floor.sh run|create-start|lifecycle <runc root> <bundle>   (container id: floor.<its pid>)
# run: `runc run`. create-start: the fewest runc processes create/start can run (create, start,
# delete), waiting for the container's init with a /proc poll, since this shell is not its
# parent. lifecycle: the same with the `runc state` after the create that the create/start
# lifecycle of docs/runtime-oci.md runs (Slurm's and jobrt's) to see `created`. Exits 0 when the
# container ran and is gone.
set -eu
mode=$1 root=$2 bundle=$3 id=floor.$$
if [ "$mode" = run ]; then
  exec runc --root "$root" run "$id" -b "$bundle" </dev/null
fi
runc() { command runc --root "$root" "$@"; }
case $mode in create-start | lifecycle) ;; *) echo "runc-floor.sh: unknown mode $mode" >&2; exit 2 ;; esac
pidfile="$root.$id.pid"
# A failure on the way leaves no container behind.
trap 'runc delete --force "$id" >/dev/null 2>&1; rm -f "$pidfile"' EXIT
runc create --pid-file "$pidfile" "$id" -b "$bundle" </dev/null
# runc writes the pid with no newline: read says EOF, and has read it.
read -r pid <"$pidfile" || [ -n "$pid" ]
[ "$mode" = create-start ] || runc state "$id" >/dev/null
runc start "$id"
# Until the init is gone or a zombie (a subreaper or init reaps it).
while read -r stat 2>/dev/null <"/proc/$pid/stat"; do
  case $stat in *") Z "*) break ;; esac
done
runc delete "$id"
rm -f "$pidfile"
trap - EXIT
