#!/bin/sh
# Builds a minimal busybox root filesystem in DIR (for OCI bundles, the Shifter stand-in's images
# and Charliecloud image dirs). Needs busybox-static. Idempotent: an existing DIR/bin/busybox is kept.
set -eu
dir=${1:?usage: busybox-rootfs.sh DIR}
bb=$(command -v busybox || true)
[ -n "$bb" ] || { echo "busybox-rootfs.sh: busybox not found (apt-get install busybox-static)" >&2; exit 1; }
if [ -x "$dir/bin/busybox" ]; then exit 0; fi
tmp="$dir.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp/bin" "$tmp/etc" "$tmp/tmp" "$tmp/proc" "$tmp/sys" "$tmp/dev" "$tmp/root" "$tmp/home" "$tmp/var/tmp"
cp "$bb" "$tmp/bin/busybox"
for app in $("$bb" --list); do
  [ "$app" = busybox ] || ln -s busybox "$tmp/bin/$app"
done
mkdir -p "$tmp/usr"
ln -s ../bin "$tmp/usr/bin"
ln -s bin "$tmp/sbin"
chmod 1777 "$tmp/tmp" "$tmp/var/tmp"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n' > "$tmp/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$tmp/etc/group"
printf 'NAME="jobrt busybox test image"\nID=jobrt-busybox\n' > "$tmp/etc/os-release"
echo "jobrt-busybox-image" > "$tmp/etc/jobrt-image"
mv "$tmp" "$dir"
