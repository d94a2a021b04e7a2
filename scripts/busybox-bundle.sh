#!/bin/sh
# Builds an OCI bundle in DIR: DIR/rootfs from busybox-rootfs.sh and DIR/config.json from
# `runc spec` (non-terminal, so tasks keep their stdio). Pass --rootless for a rootless spec.
set -eu
dir=${1:?usage: busybox-bundle.sh DIR [--rootless]}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir"
sh "$here/busybox-rootfs.sh" "$dir/rootfs"
if [ ! -f "$dir/config.json" ]; then
  command -v runc >/dev/null || { echo "busybox-bundle.sh: runc not found (apt-get install runc)" >&2; exit 1; }
  (cd "$dir" && runc spec ${2:-} && sed -i 's/"terminal": true/"terminal": false/' config.json)
fi
