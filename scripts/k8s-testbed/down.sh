#!/usr/bin/env bash
# Stop the Kubernetes test cluster up.sh started in DIR, strictly by the pids in
# DIR/run/*.pid (each checked to still be the program up.sh started): the
# controllers first, then the control plane, etcd last. Keeps DIR's logs.
set -u
DIR=$(cd "${1:?usage: down.sh DIR}" 2>/dev/null && pwd) || exit 0
RUN=$DIR/run
stop() {  # name
    local f=$RUN/$1.pid pid
    [ -f "$f" ] || return 0
    pid=$(tr -dc '0-9' < "$f")
    # the pid must still be a process whose command line names DIR (each daemon's does)
    if [ -n "$pid" ] && tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline" | grep -qF "$DIR"; then
        kill -TERM "$pid" 2>/dev/null
        for _ in $(seq 100); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
        [ -d "/proc/$pid" ] && kill -KILL "$pid" 2>/dev/null
    fi
    rm -f "$f"
}
for name in kueue jobset kwok kube-scheduler kube-controller-manager kube-apiserver etcd; do
    stop "$name"
done
exit 0
