#!/usr/bin/env bash
# Start a real Slurm cluster on this machine from files `podium slurm render --testbed DIR`
# wrote to DIR/etc: a private munged, slurmctld and one slurmd per node (`slurmd -N`).
# One-host layout: every slurmd on 127.0.0.1. Hosts layout (`render --hosts`): each
# node a host of its own: a network namespace with an address on a bridge this script
# makes (10.211.X.0/24, inside these namespaces and the bridge only), and its own UTS
# and mount namespaces (its hostname, an /etc/hosts naming every node). Every daemon's
# pid lands in DIR/run/*.pid and every namespace and link made in DIR/run/; down.sh
# removes exactly those. Adapted from the team's shared testbed (../shared/slurm-testbed).
#
# With --accounting it also starts a private MariaDB (its data in DIR/mysql, TCP on
# 127.0.0.1 only) and slurmdbd, registers the cluster, and has slurmctld enforce
# associations and their limits (GrpTRES, as `podium slurm apply teams` sets them).
#
#   bash scripts/slurm-testbed/up.sh DIR [--accounting]   # ~1-5 s (+~5 s); prints "ready"
set -euo pipefail
DIR=$(cd "${1:?usage: up.sh DIR [--accounting] (rendered with podium slurm render --testbed DIR)}" && pwd)
ACCOUNTING=0
case ${2:-} in
    "") ;;
    --accounting) ACCOUNTING=1 ;;
    *) echo "up.sh: unknown option ${2}: expected --accounting or nothing" >&2; exit 2 ;;
esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ -f "$DIR/etc/testbed.env" ] || { echo "up.sh: $DIR/etc/testbed.env missing: run podium slurm render --testbed $DIR first" >&2; exit 1; }
# shellcheck disable=SC1091
. "$DIR/etc/testbed.env"
[ "$(id -u)" = 0 ] || { echo "up.sh: must run as root (slurmd runs jobs as their users)" >&2; exit 1; }
want_bins="munged mungekey slurmctld slurmd sbatch"
[ $ACCOUNTING = 1 ] && want_bins="$want_bins slurmdbd sacctmgr mariadbd mariadb-install-db"
for b in $want_bins; do
    command -v $b >/dev/null || { echo "up.sh: $b not installed (run install.sh)" >&2; exit 1; }
done
trap 'rc=$?; if [ $rc != 0 ]; then echo "up.sh: failed (rc=$rc); logs in $DIR/log" >&2; bash "$HERE/down.sh" "$DIR" >&2 || true; fi' EXIT
if ls "$DIR"/run/*.pid >/dev/null 2>&1; then bash "$HERE/down.sh" "$DIR"; fi
busy=$(ss -Hltn 2>/dev/null | awk '{print $4}' | grep -E ":$TB_PORT_CTLD\$" || true)
[ -z "$busy" ] || { echo "up.sh: port $TB_PORT_CTLD in use (another cluster? use --port-base)" >&2; exit 1; }
rm -rf "$DIR/state" "$DIR/spool" "$DIR/log" "$DIR/run" "$DIR/munge" "$DIR/dev" "$DIR/mysql"
mkdir -p "$DIR"/{state,log,run,dev,munge/key,shared/podium,nodes}
chmod 755 "$DIR" "$DIR/munge"; chmod 700 "$DIR/munge/key"
chmod 1777 "$DIR/shared/podium"  # every user's jobs keep their state there (user-NAME, 0700)

# Private munge: own key and socket.
mungekey -c -k "$DIR/munge/key/munge.key" -b 1024
munged --key-file="$DIR/munge/key/munge.key" --socket="$DIR/munge/munge.sock" \
       --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" \
       --seed-file="$DIR/munge/key/munged.seed"
for _ in $(seq 50); do munge -S "$DIR/munge/munge.sock" -n >/dev/null 2>&1 && break; sleep 0.1; done

# Declared GPUs: char devices with /dev/null's numbers (gres/gpu needs File=).
for ((g = 0; g < TB_GPU_FILES; g++)); do mknod "$DIR/dev/nvidia$g" c 1 3; done
for n in $TB_NODES; do mkdir -p "$DIR/spool/$n" "$DIR/nodes/$n"; touch "$DIR/nodes/$n/kern.log"; done

export SLURM_CONF=$DIR/etc/slurm.conf
if [ "${TB_HOSTS:-0}" = 1 ]; then
    command -v ip >/dev/null && command -v unshare >/dev/null \
        || { echo "up.sh: the hosts layout needs ip (iproute2) and unshare (util-linux)" >&2; exit 1; }
    # The bridge: the head's address; nf_call_iptables off, so that a host firewall's
    # FORWARD rules never see traffic between these namespaces.
    bridge=pdmb$TB_ID
    ip link add "$bridge" type bridge nf_call_iptables 0 2>/dev/null \
        || ip link add "$bridge" type bridge
    echo "$bridge" > "$DIR/run/bridge"
    ip addr add "$TB_HEAD_ADDR/24" dev "$bridge"
    ip link set "$bridge" up
    # Leaf switches (the definition's network layers, TB_SWITCHES: each node's): switch 1
    # is that bridge, each other one a bridge of its own with an uplink (a veth pair)
    # into it: one layer-2 network, as leaf switches under a spine are.
    read -r -a switch_of <<< "${TB_SWITCHES:-}"
    for k in $(printf '%s\n' "${switch_of[@]}" | sort -un); do
        [ "$k" = 1 ] && continue
        ip link add "pdmb${TB_ID}s$k" type bridge nf_call_iptables 0 2>/dev/null \
            || ip link add "pdmb${TB_ID}s$k" type bridge
        echo "pdmb${TB_ID}s$k" >> "$DIR/run/links"
        ip link add "pdm${TB_ID}u$k" type veth peer name "pdm${TB_ID}d$k"
        echo "pdm${TB_ID}u$k" >> "$DIR/run/links"
        ip link set "pdm${TB_ID}u$k" master "$bridge" up
        ip link set "pdm${TB_ID}d$k" master "pdmb${TB_ID}s$k" up
        ip link set "pdmb${TB_ID}s$k" up
    done
    set -- $TB_ADDRS
    i=0
    for n in $TB_NODES; do
        i=$((i + 1)); addr=$1; shift
        switch=${switch_of[$((i - 1))]:-1}
        leaf=$([ "$switch" = 1 ] && echo "$bridge" || echo "pdmb${TB_ID}s$switch")
        ns=pdm$TB_ID-$i
        ip netns add "$ns"
        echo "$ns" >> "$DIR/run/netns"
        ip link add "pdm${TB_ID}h$i" type veth peer name "pdm${TB_ID}n$i"
        echo "pdm${TB_ID}h$i" >> "$DIR/run/links"
        ip link set "pdm${TB_ID}n$i" netns "$ns"
        ip link set "pdm${TB_ID}h$i" master "$leaf" up
        ip -n "$ns" link set "pdm${TB_ID}n$i" name eth0
        ip -n "$ns" addr add "$addr/24" dev eth0
        ip -n "$ns" link set eth0 up
        ip -n "$ns" link set lo up
    done
fi
# Cgroups: with cgroup v1 (and the hosts layout), each node gets a subtree of its own
# per controller, podium-tb<ID>/<node>, which node.sh binds over /sys/fs/cgroup/<c> in
# the node's mount namespace, so its slurmd's proctrack/cgroup and task/cgroup act
# there; the directories made are listed in DIR/run/cgroups for down.sh. Elsewhere the
# nodes share the machine's processes (proctrack/linuxproc).
cgroups=0
if [ "${TB_HOSTS:-0}" = 1 ] && [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = tmpfs ]; then
    cgroups=1
    for c in $TB_CGROUP_CONTROLLERS; do
        [ -w "/sys/fs/cgroup/$c" ] || cgroups=0
    done
fi
if [ $cgroups = 1 ]; then
    for c in $TB_CGROUP_CONTROLLERS; do
        top=/sys/fs/cgroup/$c/podium-tb$TB_ID
        mkdir "$top" && echo "$top" >> "$DIR/run/cgroups"
        for n in $TB_NODES; do mkdir "$top/$n"; done
        if [ "$c" = cpuset ]; then  # a new cpuset is empty until given its parent's
            for f in cpuset.cpus cpuset.mems; do
                cat "/sys/fs/cgroup/cpuset/$f" > "$top/$f"
                for n in $TB_NODES; do cat "$top/$f" > "$top/$n/$f"; done
            done
        fi
    done
    printf 'ProctrackType=proctrack/cgroup\nTaskPlugin=task/cgroup\n' > "$DIR/etc/proctrack.conf"
else
    printf 'ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n' > "$DIR/etc/proctrack.conf"
fi
if [ $ACCOUNTING = 1 ]; then
    # MariaDB of its own: no config files read, no grant tables (only slurmdbd, on
    # loopback, talks to it), data under DIR/mysql.
    mkdir -p "$DIR/mysql"
    mariadb-install-db --no-defaults --datadir="$DIR/mysql/data" --user=root \
        --auth-root-authentication-method=normal --skip-test-db >"$DIR/log/mariadb-install.log" 2>&1
    setsid mariadbd --no-defaults --datadir="$DIR/mysql/data" --user=root \
        --socket="$DIR/mysql/mysqld.sock" --port="$TB_PORT_DB" --bind-address=127.0.0.1 \
        --skip-grant-tables --skip-name-resolve --pid-file="$DIR/run/mariadbd.pid" \
        --log-error="$DIR/log/mariadb.log" </dev/null >/dev/null 2>&1 &
    for _ in $(seq 100); do [ -S "$DIR/mysql/mysqld.sock" ] && break; sleep 0.1; done
    [ -S "$DIR/mysql/mysqld.sock" ] || { tail "$DIR/log/mariadb.log" >&2; exit 1; }
    cat > "$DIR/etc/slurmdbd.conf" <<DBD
AuthType=auth/munge
AuthInfo=socket=$DIR/munge/munge.sock
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$TB_PORT_DBD
SlurmUser=root
PidFile=$DIR/run/slurmdbd.pid
LogFile=$DIR/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$TB_PORT_DB
StorageUser=root
StorageLoc=slurm_acct_db
DBD
    chmod 600 "$DIR/etc/slurmdbd.conf"
    cat > "$DIR/etc/accounting.conf" <<ACC
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$TB_PORT_DBD
AccountingStoragePass=$DIR/munge/munge.sock
AccountingStorageEnforce=associations,limits,qos
AccountingStorageTRES=gres/gpu
ACC
    slurmdbd
    for _ in $(seq 100); do timeout 5 sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.1; done
    sacctmgr -i add cluster "$TB_CLUSTER" >/dev/null
else
    echo "AccountingStorageType=accounting_storage/none" > "$DIR/etc/accounting.conf"
fi
slurmctld -i
for _ in $(seq 100); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.1; done
scontrol ping | grep -q UP || { tail "$DIR/log/slurmctld.log"; exit 1; }
for n in $TB_NODES; do bash "$HERE/node.sh" "$DIR" "$n" start; done
want=$(echo $TB_NODES | wc -w)
idle=0
for _ in $(seq 300); do
    idle=$(sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l)
    [ "$idle" -ge "$want" ] && break
    sleep 0.2
done
[ "$idle" -ge "$want" ] || { sinfo -N -o '%N %T %E'; echo "up.sh: only $idle of $want nodes idle" >&2; exit 1; }
echo "up.sh: ready: $want nodes idle; $(sed -n 1p "$DIR/etc/proctrack.conf"); SLURM_CONF=$SLURM_CONF"
