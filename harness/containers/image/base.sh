#!/bin/sh
# Build the base root file system with debootstrap: Debian bookworm, minbase, plus the
# packages in packages.txt. Usage: base.sh TARGET_DIR MIRROR_URL
# The result is made into an image with `docker import` by harness/containers/image.py, which hashes
# this file and packages.txt to decide when to rebuild.
set -eu
target=$1
mirror=$2
here=$(dirname "$0")
packages=$(grep -v '^#' "$here/packages.txt" | grep -v '^$' | paste -sd, -)

debootstrap --variant=minbase --include="$packages" bookworm "$target" "$mirror"

# iptables: the nf_tables backend works in a container with NET_ADMIN on this kernel and
# is Debian's default; say so explicitly so a future default change cannot surprise us.
chroot "$target" update-alternatives --set iptables /usr/sbin/iptables-nft
chroot "$target" update-alternatives --set ip6tables /usr/sbin/ip6tables-nft

# Host keys are made per container at start (entrypoint.sh), never baked in.
rm -f "$target"/etc/ssh/ssh_host_*
chroot "$target" apt-get clean
rm -rf "$target"/var/lib/apt/lists/* "$target"/var/cache/apt/*.bin \
       "$target"/usr/share/doc/* "$target"/usr/share/man/* "$target"/usr/share/info/*
echo "base.sh: root file system ready in $target"
