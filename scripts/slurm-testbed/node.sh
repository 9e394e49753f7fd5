#!/usr/bin/env bash
# One node of the test cluster in DIR (faults for tests, and up.sh's own node start):
#
#   bash scripts/slurm-testbed/node.sh DIR NODE start   # its slurmd (in its namespaces)
#   bash scripts/slurm-testbed/node.sh DIR NODE crash   # SIGKILL its slurmd (pid file)
#   bash scripts/slurm-testbed/node.sh DIR NODE cut     # hosts layout: its link down
#   bash scripts/slurm-testbed/node.sh DIR NODE join    # hosts layout: its link up
#   bash scripts/slurm-testbed/node.sh DIR NODE kill    # hosts layout: the host dies: every
#        process in its network namespace SIGKILLed (slurmd, slurmstepd, the job's tasks),
#        then its link down; mend with join, then start
#   bash scripts/slurm-testbed/node.sh DIR NODE slow [RATE]  # hosts layout: its link
#        limited to RATE (default 20mbit) both ways: a tbf qdisc on each end of its veth
#   bash scripts/slurm-testbed/node.sh DIR NODE fast    # hosts layout: the limit removed
set -euo pipefail
DIR=$(cd "${1:?usage: node.sh DIR NODE start|crash|kill|cut|join|slow|fast}" && pwd)
NODE=${2:?node name}
ACTION=${3:?start, crash, kill, cut, join, slow or fast}
# shellcheck disable=SC1091
. "$DIR/etc/testbed.env"
export SLURM_CONF=$DIR/etc/slurm.conf
i=0; index=0
for n in $TB_NODES; do i=$((i + 1)); [ "$n" = "$NODE" ] && index=$i; done
[ $index != 0 ] || { echo "node.sh: no node $NODE in $DIR (nodes: $TB_NODES)" >&2; exit 1; }
hosts=${TB_HOSTS:-0}
case $ACTION in
start)
    if [ "$hosts" = 1 ]; then
        # slurmd daemonizes inside its node's namespaces: network (its address), UTS
        # (its hostname) and mount (its /etc/hosts; host mounts still propagate in).
        # nsenter, not `ip netns exec`, which remounts /sys and so hides the cgroups.
        # With cgroups (up.sh made DIR/run/cgroups), the node's own subtree of each
        # controller is bound over /sys/fs/cgroup/<c> there.
        binds=""
        if [ -f "$DIR/run/cgroups" ]; then
            for c in $TB_CGROUP_CONTROLLERS; do binds="$binds $c"; done
        fi
        nsenter --net="/run/netns/pdm$TB_ID-$index" unshare --uts --mount --propagation slave -- \
            sh -c 'dir=$1 node=$2 id=$3; shift 3
                   for c in "$@"; do
                       mount --bind "/sys/fs/cgroup/$c/podium-tb$id/$node" "/sys/fs/cgroup/$c" || exit 1
                   done
                   mount --bind "$dir/etc/hosts" /etc/hosts && hostname "$node" && exec slurmd -N "$node"' \
            sh "$DIR" "$NODE" "$TB_ID" $binds
    else
        slurmd -N "$NODE"
    fi ;;
crash)
    pid=$(tr -dc '0-9' < "$DIR/run/slurmd-$NODE.pid")
    [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$(readlink -f "$(command -v slurmd)")" ] \
        || { echo "node.sh: no slurmd of $NODE runs" >&2; exit 1; }
    kill -KILL "$pid" ;;
kill)
    [ "$hosts" = 1 ] || { echo "node.sh: kill needs the hosts layout (render --hosts)" >&2; exit 1; }
    ns="pdm$TB_ID-$index"
    # The processes die first (the kernel closes their connections, as a crashed host's
    # peers see), then the host is gone from the network.
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        pids=$(ip netns pids "$ns")
        [ -n "$pids" ] || break
        # shellcheck disable=SC2086
        kill -KILL $pids 2>/dev/null || true
        sleep 0.1
    done
    [ -z "$(ip netns pids "$ns")" ] || { echo "node.sh: processes of $NODE outlived SIGKILL" >&2; exit 1; }
    ip link set "pdm${TB_ID}h$index" down ;;
cut|join)
    [ "$hosts" = 1 ] || { echo "node.sh: $ACTION needs the hosts layout (render --hosts)" >&2; exit 1; }
    ip link set "pdm${TB_ID}h$index" "$([ "$ACTION" = cut ] && echo down || echo up)" ;;
slow|fast)
    [ "$hosts" = 1 ] || { echo "node.sh: $ACTION needs the hosts layout (render --hosts)" >&2; exit 1; }
    # tbf, not netem: a rate limit needs only sch_tbf, which more kernels have.
    rate=${4:-20mbit}
    for end in "" "-n pdm$TB_ID-$index"; do
        # shellcheck disable=SC2086
        dev=$([ -z "$end" ] && echo "pdm${TB_ID}h$index" || echo eth0)
        # shellcheck disable=SC2086
        tc $end qdisc del dev "$dev" root 2>/dev/null || true
        if [ "$ACTION" = slow ]; then
            # shellcheck disable=SC2086
            tc $end qdisc add dev "$dev" root tbf rate "$rate" burst 32kbit latency 400ms
        fi
    done ;;
*)
    echo "node.sh: unknown action $ACTION (start, crash, cut, join, slow or fast)" >&2; exit 1 ;;
esac
