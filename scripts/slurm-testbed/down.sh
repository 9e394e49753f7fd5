#!/usr/bin/env bash
# Stop the cluster up.sh started in DIR, strictly by the pids in DIR/run/*.pid (never by
# name): cancel its jobs, then slurmd(s), slurmctld, slurmdbd and MariaDB (under
# --accounting), munged; then any slurmstepd left behind that carries this cluster's
# SLURM_CONF in its environment.
set -u
DIR=$(cd "${1:?usage: down.sh DIR}" 2>/dev/null && pwd) || exit 0
RUN=$DIR/run
export SLURM_CONF=$DIR/etc/slurm.conf

live_pid() {  # $1 pid file, $2 program: its pid if it still runs that program
    local f=$1 exe=$2 pid want cur
    [ -f "$f" ] || return 0
    pid=$(tr -dc '0-9' < "$f")
    want=$(readlink -f "$(command -v "$exe" 2>/dev/null || echo "/usr/sbin/$exe")")
    cur=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
    [ -n "$pid" ] && [ "$cur" = "$want" ] && echo "$pid"
    return 0
}
. "$(dirname "$0")/../stop-pids.sh"
stop_pidfiles() {  # $1 program, then its pid files: all at once (scripts/stop-pids.sh)
    local exe=$1 pids=() f pid
    shift
    for f in "$@"; do
        [ -e "$f" ] || continue
        pid=$(live_pid "$f" "$exe")
        [ -n "$pid" ] && pids+=("$pid")
    done
    stop_pids "${pids[@]}"
    rm -f "$@"
}

if [ -f "$RUN/slurmctld.pid" ] && [ -d "/proc/$(tr -dc '0-9' < "$RUN/slurmctld.pid")" ]; then
    jobs=$(timeout 10 squeue -h -o %A 2>/dev/null | tr '\n' ' ')
    if [ -n "${jobs// }" ]; then
        timeout 10 scancel $jobs 2>/dev/null
        for _ in $(seq 50); do [ -z "$(timeout 5 squeue -h -o %A 2>/dev/null)" ] && break; sleep 0.2; done
    fi
fi
stop_pidfiles slurmd "$RUN"/slurmd-*.pid  # every node at once
stop_pidfiles slurmctld "$RUN/slurmctld.pid"
stop_pidfiles slurmdbd "$RUN/slurmdbd.pid"
stop_pidfiles mariadbd "$RUN/mariadbd.pid"
stop_pidfiles munged "$RUN/munged.pid"
stepd=$(readlink -f /usr/sbin/slurmstepd 2>/dev/null)
for d in /proc/[0-9]*; do
    [ "$(readlink "$d/exe" 2>/dev/null)" = "$stepd" ] || continue
    tr '\0' '\n' < "$d/environ" 2>/dev/null | grep -qx "SLURM_CONF=$SLURM_CONF" || continue
    kill -KILL "${d#/proc/}" 2>/dev/null
done
# The cgroup subtrees up.sh made (each listed top, its node directories and whatever
# slurmd made under them, deepest first; empty once their processes are gone).
if [ -f "$RUN/cgroups" ]; then
    while read -r top; do
        case $top in /sys/fs/cgroup/*/podium-tb*) ;; *) continue ;; esac
        for _ in $(seq 50); do
            find "$top" -depth -type d -exec rmdir {} + 2>/dev/null
            [ -d "$top" ] || break
            sleep 0.1
        done
    done < "$RUN/cgroups"
    rm -f "$RUN/cgroups"
fi
# The hosts layout: the namespaces, links and bridge up.sh made, by the names it wrote.
if [ -f "$RUN/netns" ]; then
    while read -r ns; do ip netns del "$ns" 2>/dev/null; done < "$RUN/netns"
    rm -f "$RUN/netns"
fi
if [ -f "$RUN/links" ]; then
    while read -r link; do ip link del "$link" 2>/dev/null; done < "$RUN/links"
    rm -f "$RUN/links"
fi
if [ -f "$RUN/bridge" ]; then
    ip link del "$(cat "$RUN/bridge")" 2>/dev/null
    rm -f "$RUN/bridge"
fi
exit 0
