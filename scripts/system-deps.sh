#!/bin/sh
# Installs the system packages the end-to-end tests drive for real (runc, busybox, Slurm, munge,
# Charliecloud, bubblewrap, iproute2, util-linux; strace to count the processes a step starts; zsh for the completion test, man-db and groff for the man pages; skopeo, umoci, docker-registry and htpasswd for container images; squashfs-tools, and squashfuse with fuse3 (fusermount3) for the shared image store; gnupg to sign test images for the image trust policy; MPICH, Open MPI, mpi4py and libpmix-dev, which Slurm's mpi/pmix plugin loads, for MPI under srun; gcc, make, binutils and libslurm-dev's spank.h to build and check jobrt's SPANK plugin). Needs root; installs only what is missing.
# A pair is "command:package", or "/path:package" for a file that is not a command.
set -eu
need=""
for pair in runc:runc strace:strace busybox:busybox-static slurmctld:slurm-wlm munged:munge ch-run:charliecloud-runtime bwrap:bubblewrap ip:iproute2 unshare:util-linux /usr/bin/time:time skopeo:skopeo umoci:umoci docker-registry:docker-registry htpasswd:apache2-utils mksquashfs:squashfs-tools squashfuse:squashfuse fusermount3:fuse3 gpg:gnupg zsh:zsh man:man-db groff:groff-base mpicc.mpich:mpich mpicc.openmpi:libopenmpi-dev mpirun.openmpi:openmpi-bin /usr/lib/python3/dist-packages/mpi4py/__init__.py:python3-mpi4py /usr/lib/$(uname -m)-linux-gnu/libpmix.so:libpmix-dev cc:gcc make:make nm:binutils /usr/include/slurm/spank.h:libslurm-dev; do
  cmd=${pair%%:*}; pkg=${pair#*:}
  case $cmd in /*) [ -e "$cmd" ] || need="$need $pkg"; continue ;; esac
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
