#!/bin/sh
# Installs the system packages the end-to-end tests drive for real (runc, busybox, Slurm, munge,
# Charliecloud, bubblewrap, iproute2, util-linux; strace to count the processes a step starts; zsh for the completion test, man-db and groff for the man pages; skopeo, umoci, docker-registry and htpasswd for container images; squashfs-tools, and squashfuse with fuse3 (fusermount3) for the shared image store). Needs root; installs only what is missing.
set -eu
need=""
for pair in runc:runc strace:strace busybox:busybox-static slurmctld:slurm-wlm munged:munge ch-run:charliecloud-runtime bwrap:bubblewrap ip:iproute2 unshare:util-linux /usr/bin/time:time skopeo:skopeo umoci:umoci docker-registry:docker-registry htpasswd:apache2-utils mksquashfs:squashfs-tools squashfuse:squashfuse fusermount3:fuse3 zsh:zsh man:man-db groff:groff-base; do
  cmd=${pair%%:*}; pkg=${pair#*:}
  command -v "$cmd" >/dev/null 2>&1 || PATH="$PATH:/usr/sbin:/sbin" command -v "$cmd" >/dev/null 2>&1 || need="$need $pkg"
done
[ -z "$need" ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "system-deps: missing packages:$need (run as root, or: sudo apt-get install$need)" >&2
  exit 1
fi
echo "system-deps: installing$need" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq $need >/dev/null
