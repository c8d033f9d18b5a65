#!/bin/sh
# Entry point of a test SSH host: a fresh host key, the session's public key for root and
# for `tester`, the tools named in REMOVE_TOOLS deleted (a host that lacks them), then sshd.
set -eu
mkdir -p /run/sshd
[ -f /etc/ssh/ssh_host_ed25519_key ] || ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key
for home in /root /home/tester; do
    mkdir -p "$home/.ssh"
    printf '%s\n' "$SSH_AUTHORIZED_KEY" > "$home/.ssh/authorized_keys"
    chmod 700 "$home/.ssh"
    chmod 600 "$home/.ssh/authorized_keys"
done
chown -R tester:tester /home/tester/.ssh
for tool in ${REMOVE_TOOLS:-}; do
    rm -f "$(command -v "$tool")"
done
exec /usr/sbin/sshd -D -e
