#!/bin/sh
# Install bookworm's etcd-server at version $1 (a Debian version, e.g. 3.4.23-4+b4) from the
# archive the image's own apt sources name, without the service being started (no init runs
# in a container; the harness starts etcd itself), then check the binary answers.
set -eu
version=$1
echo "install-etcd.sh: etcd-server $version"
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
chmod 755 /usr/sbin/policy-rc.d
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "etcd-server=$version"
rm -f /usr/sbin/policy-rc.d
etcd --version
apt-get clean
rm -rf /var/lib/apt/lists/* /usr/share/doc/* /usr/share/man/*
