#!/usr/bin/env bash
# Install Debian's Slurm and munge packages for the test cluster, if missing.
# Exit 0 when they are (or already were) installed; non-zero with the reason otherwise.
# Maintainer scripts are kept from starting daemons with their default configs.
set -euo pipefail
# libpmix-dev: Debian's mpi/pmix plugin dlopens the unversioned libpmix.so, so
# `srun --mpi=pmix` (the seed's nccl-test script) fails without it.
# iproute2 and util-linux: the hosts layout (a network, UTS and mount namespace per node).
# slurmdbd and mariadb-server: accounting (up.sh --accounting), where team quotas are
# associations' GrpTRES.
want=(munge slurmctld slurmd slurm-client libpmix-dev iproute2 util-linux slurmdbd mariadb-server)
missing=()
for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} = 0 ] && exit 0
[ "$(id -u)" = 0 ] || { echo "install.sh: need root to apt-get install ${missing[*]}" >&2; exit 1; }
command -v apt-get >/dev/null || { echo "install.sh: no apt-get (not Debian?)" >&2; exit 1; }
log=$(mktemp /tmp/podium-slurm-install.XXXXXX)
added_policy=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; added_policy=1
fi
export DEBIAN_FRONTEND=noninteractive
ok=0
apt-get install -y -q --no-install-recommends "${missing[@]}" >"$log" 2>&1 && ok=1
if [ $ok = 0 ]; then  # package lists may be stale on a fresh machine
    apt-get update -q >>"$log" 2>&1 || true
    apt-get install -y -q --no-install-recommends "${missing[@]}" >>"$log" 2>&1 && ok=1
fi
[ $added_policy = 1 ] && rm -f /usr/sbin/policy-rc.d
if [ $ok = 0 ]; then
    tail -5 "$log" >&2
    echo "install.sh: apt-get install ${missing[*]} failed (log: $log)" >&2
    exit 1
fi
rm -f "$log"
echo "install.sh: installed ${missing[*]}"
