#!/bin/sh
# The README's main job: set up, then run a heterogeneous demo step on this node with the
# embedded defaults (no configuration files): 4 tasks with runtime none, plus a second component,
# in a busybox OCI container when runc is installed, else with runtime none.
set -eu
cd "$(dirname "$0")/.."
sh scripts/setup.sh
conf=$(mktemp -d)
trap 'rm -rf "$conf"' EXIT
export JOBRT_CONF_DIR="$conf"
if [ "$(id -u)" != 0 ]; then
  printf 'SpoolDir=%s/spool\n' "$conf" > "$conf/jobrt.conf"
fi
second="--runtime none -n 1 sh -c 'echo component 1: task \$SLURM_PROCID on \$SLURMD_NODENAME, het size \$SLURM_HET_SIZE'"
if command -v runc >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  bundle=/tmp/jobrt-fixtures/demo-bundle
  sh scripts/busybox-bundle.sh "$bundle" >/dev/null
  second="--runtime oci --container $bundle -n 1 sh -c 'echo component 1: task \$SLURM_PROCID inside \$(cat /etc/os-release | head -1), het size \$SLURM_HET_SIZE'"
fi
eval "set -- $second"
# Not exec: the shell stays to run its EXIT trap (the conf dir), and exits with jobrt's status.
node packages/cli/dist/bin.js run -l --runtime none -n 4 \
  sh -c 'echo "component 0: task $SLURM_PROCID of $SLURM_NTASKS on $SLURMD_NODENAME (job $SLURM_JOB_ID, runtime $SLURM_RUNTIME)"' \
  : "$@"
