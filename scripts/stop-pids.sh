# Sourced by the test clusters' down.sh: stop_pids PID... sends SIGTERM to each at once,
# waits for all of them (10 s at most), then SIGKILLs what is left. Callers pass only
# pids they checked to be their own processes (never found by name).
stop_pids() {
    local pid alive
    [ $# -gt 0 ] || return 0
    for pid in "$@"; do kill -TERM "$pid" 2>/dev/null; done
    for _ in $(seq 100); do
        alive=0
        for pid in "$@"; do [ -d "/proc/$pid" ] && alive=1; done
        [ "$alive" = 0 ] && return 0
        sleep 0.1
    done
    for pid in "$@"; do [ -d "/proc/$pid" ] && kill -KILL "$pid" 2>/dev/null; done
    return 0
}
