#!/usr/bin/env bash
# Stop the Kubernetes test cluster up.sh started in DIR, strictly by the pids in
# DIR/run/*.pid (each checked to still be the program up.sh started): the
# controllers first, then the control plane, etcd last. Keeps DIR's logs.
set -u
DIR=$(cd "${1:?usage: down.sh DIR}" 2>/dev/null && pwd) || exit 0
RUN=$DIR/run
running() {  # name: the pid in DIR/run/NAME.pid if it is still the program up.sh started
    local f=$RUN/$1.pid pid
    [ -f "$f" ] || return 0
    pid=$(tr -dc '0-9' < "$f")
    # the pid must still be a process whose command line names DIR (each daemon's does)
    if [ -n "$pid" ] && tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline" | grep -qF "$DIR"; then
        echo "$pid"
    fi
}
. "$(dirname "$0")/../stop-pids.sh"
stop() {  # names: all at once (scripts/stop-pids.sh), then their pid files
    local pids=() name pid
    for name in "$@"; do
        pid=$(running "$name")
        [ -n "$pid" ] && pids+=("$pid")
    done
    stop_pids "${pids[@]}"
    for name in "$@"; do rm -f "$RUN/$name.pid"; done
}
# The controllers together (each takes ~2 s to stop, none needs another's), then the
# API server, then etcd.
stop kueue jobset kwok kube-scheduler kube-controller-manager
stop kube-apiserver
stop etcd
exit 0
