#!/bin/sh
# Node container entry point. Makes this container's own SSH host key and authorises the
# public key in SSH_AUTHORIZED_KEY (the harness's per-run key). With no command, runs sshd
# in the foreground (the harness starts the node over SSH). With a command (as
# docker-compose.yml does to run the node directly), starts sshd in the background when a
# key was given, then execs the command.
set -eu
mkdir -p /run/sshd /root/.ssh
chmod 700 /root/.ssh
if [ ! -f /etc/ssh/ssh_host_ed25519_key ]; then
    ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key
fi
if [ -n "${SSH_AUTHORIZED_KEY:-}" ]; then
    printf '%s\n' "$SSH_AUTHORIZED_KEY" > /root/.ssh/authorized_keys
    chmod 600 /root/.ssh/authorized_keys
fi
if [ "$#" -eq 0 ]; then
    exec /usr/sbin/sshd -D -e
fi
if [ -n "${SSH_AUTHORIZED_KEY:-}" ]; then
    /usr/sbin/sshd -e
fi
exec "$@"
