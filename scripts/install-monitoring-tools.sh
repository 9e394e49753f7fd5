#!/usr/bin/env bash
# Install Debian's prometheus for the metrics test (tests/integration/test_prometheus.py
# starts its own server on loopback) and chromium with chromium-driver for the
# dashboard test (tests/integration/test_dashboard.py), if missing. Maintainer scripts
# are kept from starting the packaged services. Exit 0 when it is (or already was) installed; non-zero
# with the reason otherwise.
set -euo pipefail
want=(prometheus chromium chromium-driver)
missing=()
for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} = 0 ] && exit 0
[ "$(id -u)" = 0 ] || { echo "install-monitoring-tools.sh: need root to install ${missing[*]}" >&2; exit 1; }
command -v apt-get >/dev/null || { echo "install-monitoring-tools.sh: no apt-get (not Debian?)" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp /tmp/podium-monitoring-install.XXXXXX)
added_policy=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; added_policy=1
fi
ok=0
apt-get install -y -q --no-install-recommends "${missing[@]}" >"$log" 2>&1 && ok=1
if [ $ok = 0 ]; then  # package lists may be stale on a fresh machine
    apt-get update -q >>"$log" 2>&1 || true
    apt-get install -y -q --no-install-recommends "${missing[@]}" >>"$log" 2>&1 && ok=1
fi
[ $added_policy = 1 ] && rm -f /usr/sbin/policy-rc.d
[ $ok = 1 ] || { tail -5 "$log" >&2; exit 1; }
rm -f "$log"
echo "install-monitoring-tools.sh: installed ${missing[*]}"
