#!/bin/sh
# Usage: devlog.sh SOCKET COMMAND [ARG...] (as root)
# Runs COMMAND in a mount namespace of its own whose /dev is a small tmpfs with null, zero, full,
# random, urandom and tty from the real /dev, and /dev/log a symlink to SOCKET (as journald's
# /dev/log is a symlink to its socket): a test can receive what a program sends to syslog's
# default socket without touching the machine's /dev.
set -eu
socket=$1
shift
exec unshare --mount --propagation private sh -eu -c '
  socket=$1
  shift
  old=$(mktemp -d)
  mount --rbind /dev "$old"
  mount -t tmpfs -o mode=755,size=64k jobrt-test-dev /dev
  for n in null zero full random urandom tty; do
    touch "/dev/$n"
    mount --bind "$old/$n" "/dev/$n"
  done
  umount -l "$old"
  rmdir "$old"
  ln -s /proc/self/fd /dev/fd
  ln -s "$socket" /dev/log
  exec "$@"
' dev-log "$socket" "$@"
