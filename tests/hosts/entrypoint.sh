#!/bin/sh
# Entry point of a test SSH host: a fresh host key, the session's public key for root,
# `tester` and `nosudo`, the tools named in REMOVE_TOOLS deleted (a host that lacks them),
# then sshd.
set -eu
mkdir -p /run/sshd
[ -f /etc/ssh/ssh_host_ed25519_key ] || ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key
for user in root tester nosudo; do
    home=$(getent passwd "$user" | cut -d: -f6)
    mkdir -p "$home/.ssh"
    printf '%s\n' "$SSH_AUTHORIZED_KEY" > "$home/.ssh/authorized_keys"
    chmod 700 "$home/.ssh"
    chmod 600 "$home/.ssh/authorized_keys"
    chown -R "$user:$user" "$home/.ssh"
done
for tool in ${REMOVE_TOOLS:-}; do
    rm -f "$(command -v "$tool")"
done
exec /usr/sbin/sshd -D -e
