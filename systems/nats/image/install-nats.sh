#!/bin/sh
# Install nats-server $1 (a Debian version) from trixie on a bookworm image, pinned so that
# nothing else comes from trixie (nats-pin.pref), then fail if any other package changed to a
# version bookworm does not have. Uses the mirror the image's own apt sources name.
set -eu
version=$1
here=$(dirname "$0")
mirror=$(sed -n 's|^deb \(\[[^]]*\] \)\{0,1\}\([^ ]*/debian\)/\{0,1\} bookworm .*|\2|p' /etc/apt/sources.list 2>/dev/null | head -n1)
if [ -z "$mirror" ]; then
    mirror=$(sed -n 's|^URIs: *\([^ ]*/debian\)/\{0,1\} *$|\1|p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)
fi
mirror=${mirror:-http://deb.debian.org/debian}
echo "install-nats.sh: nats-server $version from $mirror trixie"
echo "deb $mirror trixie main" > /etc/apt/sources.list.d/trixie-nats.list
install -m 644 "$here/nats-pin.pref" /etc/apt/preferences.d/nats-pin.pref
dpkg-query -W -f '${Package} ${Version}\n' | sort > /tmp/before
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "nats-server=$version"
dpkg-query -W -f '${Package} ${Version}\n' | sort > /tmp/after
comm -13 /tmp/before /tmp/after | while read -r package pversion; do
    echo "install-nats.sh: installed $package $pversion"
    [ "$package" = nats-server ] && continue
    apt-cache madison "$package" | grep -F " $pversion " | grep -q ' bookworm' \
        || { echo "install-nats.sh: $package $pversion is not bookworm's" >&2; exit 1; }
done
nats-server --version
rm -f /etc/apt/sources.list.d/trixie-nats.list /etc/apt/preferences.d/nats-pin.pref /tmp/before /tmp/after
apt-get clean
rm -rf /var/lib/apt/lists/*
