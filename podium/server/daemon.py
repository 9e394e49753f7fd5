"""The daemon process: `python -m podium.server.daemon` (what `podium up` starts).

One daemon per PODIUM_HOME, enforced by a lock held for its lifetime. Stopping it
(`podium down`, SIGTERM) leaves running jobs running: their supervisors are detached,
and the next daemon adopts them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import socket
import ssl
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn
from fastapi import FastAPI

from podium import paths
from podium.api.selection import JobFilter
from podium.config.cluster import (
    ClusterConfig,
    GpuInventory,
    default_config,
    dump_config,
    load_config,
)
from podium.config.http_config import HttpListener, split_listen
from podium.errors import ConfigError, PodiumError
from podium.jobspec.job import JobState
from podium.node.gpu_telemetry import no_telemetry, read_telemetry
from podium.node.health.suite import nvml_probe
from podium.node.inventory import (
    GpuInfo,
    resolve_inventory,
)
from podium.recover.agent import HealthAgent
from podium.run.endwatch import watch_ended
from podium.run.executor import LocalExecutor
from podium.run.rundir import close_jobs_dir, open_jobs_dir
from podium.server.controller import Controller
from podium.server.http.dashboard import cookie_name
from podium.server.http.http_limits import RequestLimits
from podium.server.http.http_listener import TokenGate, bind_tcp, tls_context
from podium.server.http.peer import PeerCredProtocol, bind_unix
from podium.server.http.prometheus_metrics import add_metrics_route, metrics_registry
from podium.server.http.rest_api import create_app
from podium.server.http.sessions import SessionBook
from podium.server.http.tokens import TokenBook
from podium.server.node_setup import declared, local_node
from podium.server.state_home import (
    close_job_files,
    highest_job_id_on_disk,
    make_private,
    open_store,
    take_instance_lock,
)
from podium.store.db import Store
from podium.store.mig_layouts import MigLayouts

log = logging.getLogger("podium.daemon")


class _Server(uvicorn.Server):
    """uvicorn's server, except that SIGTERM/SIGINT mean "stop cleanly and exit 0", and
    that `tls_sockets` are served with their own TLS context beside the plain ones
    (uvicorn's one `ssl` setting would put the unix socket under TLS too).

    uvicorn re-raises the signal after its graceful shutdown, which would kill the
    process before the daemon removes its socket and pid file and closes the store.
    """

    tls_sockets: list[tuple[socket.socket, ssl.SSLContext]]

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        self._captured_signals.clear()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.should_exit or not getattr(self, "tls_sockets", None):
            return
        config, loop = self.config, asyncio.get_running_loop()

        def protocol(_loop: asyncio.AbstractEventLoop | None = None) -> asyncio.Protocol:
            made: asyncio.Protocol = config.http_protocol_class(  # type: ignore[call-arg]
                config=config,
                server_state=self.server_state,
                app_state=self.lifespan.state,
                _loop=_loop,
            )
            return made

        for sock, context in self.tls_sockets:
            self.servers.append(
                await loop.create_server(protocol, sock=sock, ssl=context, backlog=config.backlog)
            )


def resolve_config(
    home: Path, config_file: Path | None, gpus: int | None, cpus: int | None
) -> ClusterConfig:
    """The config to run with.

    An explicit file wins, then HOME/cluster.yaml; without either, the default is
    written to HOME/cluster.yaml, unless --gpus was given (then nothing is written).
    --gpus and --cpus override the node's declaration for this run only.
    """
    path = config_file or paths.config_path(home)
    if path.exists():
        config = load_config(path)
    else:
        if config_file is not None:
            return load_config(config_file)  # raises the "cannot read" error
        config = default_config()
        if gpus is None and cpus is None:
            path.write_text(dump_config(config))
    if gpus is not None:
        gpu_type = config.node.gpus.type
        config.node.gpus = GpuInventory(
            source="declared",
            count=gpus,
            type=gpu_type,
            memory_mb=config.node.gpus.memory_mb or 81920,
        )
    if cpus is not None:
        config.node.cpus = cpus
    return config


def serve(home: Path, config: ClusterConfig, config_file: Path | None = None) -> None:
    """Run the daemon in this process until it is stopped (`config_file`: where its
    config came from, which `podium up` compares with what it is asked for)."""
    # Scheduling passes run on a worker thread: hand the interpreter to the API's
    # threads within half a millisecond (not the default 5 ms) when they need it.
    sys.setswitchinterval(0.0005)
    make_private(home)
    lock_fd = take_instance_lock(home)
    store = open_store(paths.db_path(home))
    if not store.keep_reserve():
        log.warning("the state disk is nearly full: no reserve for recording outcomes")
    gpus = resolve_inventory(config.node.gpus, place=str(home))
    config.node.gpus.count = len(gpus)
    running = bool(store.jobs(JobFilter(states=(JobState.RUNNING.value,))))
    jobs = open_jobs_dir(home, config.runtime_dir, runs_recorded=running)
    log.info("job state in %s%s", jobs.path, " (tmpfs)" if jobs.on_tmpfs else "")
    close_job_files(jobs.path)
    _keep_ids_above_disk(home, store, jobs.path)
    executor = LocalExecutor(jobs.path, lost_runs=jobs.lost_runs)
    if executor.launcher is not None:
        executor.launcher.warm_up()  # the first job need not wait for its imports
    controller, agent = _controller(home, config, config_file, store, executor, gpus)

    wake_event = asyncio.Event()
    server: uvicorn.Server | None = None

    def stop() -> None:
        if server is not None:
            server.should_exit = True

    http = config.http
    tokens = TokenBook(store, controller.clock, max_per_user=http.max_tokens_per_user)
    sessions = SessionBook(store, tokens, ttl_s=http.session_hours * 3600)
    app = create_app(controller, wake_event.set, stop, tokens, sessions)
    controller.telemetry = no_telemetry if declared(config, gpus) else read_telemetry
    add_metrics_route(app, metrics_registry(controller, controller.telemetry))
    app.router.lifespan_context = _lifespan(controller, agent, str(jobs.path), wake_event)
    context = tls_context(http)  # before any socket: a bad certificate stops the start
    sock = paths.socket_path(home)  # replaced in place: see bind_unix
    sockets = [bind_unix(str(sock))]
    tls_sockets: list[tuple[socket.socket, ssl.SSLContext]] = []
    # Bodies bounded before they are read, on every socket; over TCP the token gate
    # comes first, so nobody's body is read before they are known.
    served: Any = RequestLimits(app)
    if http.listen is not None:  # the same API over TCP, each request by its token
        tcp = bind_tcp(http.listen)
        if context is None:
            sockets.append(tcp)
        else:
            tls_sockets.append((tcp, context))
        served = TokenGate(
            served, tokens, sessions, cookie_name(http.listen, http.tls),
            metrics_open=not http.metrics_token, host_names=http.host_names,
        )  # fmt: skip
        log.info("HTTP%s listener on %s", "S" if context else "", http.listen)
    server = _Server(
        uvicorn.Config(
            served,
            http=PeerCredProtocol,
            log_level="warning",
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=5,
        )
    )
    server.tls_sockets = tls_sockets
    paths.pid_path(home).write_text(f"{os.getpid()}\n")
    try:
        server.run(sockets=sockets)
    finally:
        for listening in [*sockets, *(s for s, _ in tls_sockets)]:
            listening.close()
        try:
            agent.close()
            executor.close()
            store.close()
            close_jobs_dir(home, jobs.path)
        finally:
            # Last, so that a socket gone means a daemon done: `podium down` waits for
            # it, and what follows (a new daemon, removing HOME) no longer races with
            # this one's closing of the store and the jobs directory.
            sock.unlink(missing_ok=True)
            paths.pid_path(home).unlink(missing_ok=True)
            os.close(lock_fd)


def _keep_ids_above_disk(home: Path, store: Store, jobs_dir: Path) -> None:
    """Job ids continue after the highest any checkpoint or run directory names, even
    when the database was replaced: no id is given twice."""
    highest = highest_job_id_on_disk(home / "checkpoints", jobs_dir)
    if store.keep_ids_above(highest):
        log.warning(
            "job ids continue after %s, the highest found in %s: this database does not "
            "know it (was it replaced?), and no id is given twice",
            highest,
            home,
        )


def _controller(
    home: Path,
    config: ClusterConfig,
    config_file: Path | None,
    store: Store,
    executor: LocalExecutor,
    gpus: list[GpuInfo],
) -> tuple[Controller, HealthAgent]:
    """The controller with its health agent, the running jobs recovered, and the
    directories of runs whose ends were recorded before removed."""
    applied = MigLayouts(store).all_applied(config.node.name)
    controller = Controller(home, config, store, executor, local_node(config, gpus, applied))
    controller.config_file = str(config_file) if config_file is not None else None
    agent = HealthAgent(
        home,
        config,
        config.node.name,
        gpus,
        controller.health,
        controller.reactor,
        controller.clock,
        probe=None if declared(config, gpus) else nvml_probe(),
        mig_apply=controller.migs.apply,
    )
    controller.attach_agent(agent)
    counts = controller.reactor.recover()
    log.info("recovered running jobs: %s", counts)
    kept = set(controller.reactor.running_job_ids())
    if executor.forget_others(kept):
        log.info("removed the directories of runs whose ends were recorded before")
    return controller, agent


async def _scheduling_loop(controller: Controller, wake_event: asyncio.Event) -> None:
    """Collect ends and run passes on a worker thread (the API keeps answering), again
    at once when woken by a change, else every scheduler_interval_s."""
    interval = controller.config.scheduler_interval_s
    while True:
        wake_event.clear()
        due = interval
        try:
            due = await asyncio.to_thread(controller.housekeeping.cycle)
        except Exception:
            log.exception("scheduling pass failed")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake_event.wait(), max(0.001, min(due, interval)))


def _lifespan(
    controller: Controller, agent: HealthAgent, jobs_dir: str, wake_event: asyncio.Event
) -> Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]]:
    """The API's lifespan: the scheduling loop runs while it serves, woken at once by
    a supervisor that is over and by an Xid in the kernel's log."""

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        running = asyncio.get_running_loop()

        def ended() -> None:  # a supervisor that is over says so: collect at once
            running.call_soon_threadsafe(wake_event.set)

        watch_ended(jobs_dir, ended)
        agent.follow_kernel_log(ended)  # an Xid is read at once, not at the next interval
        task = asyncio.create_task(_scheduling_loop(controller, wake_event))
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        controller.intake.checkers.close()  # the directory-check helpers, one per user

    return lifespan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="podiumd", description="The Podium daemon.")
    parser.add_argument("--home", type=Path, default=None)
    parser.add_argument("--config", type=Path, default=None)
    parser.add_argument("--gpus", type=int, default=None)
    parser.add_argument("--cpus", type=int, default=None)
    parser.add_argument("--http", default=None, help="HOST:PORT: the HTTP listener")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    home = (args.home or paths.home()).absolute()
    try:
        home.mkdir(parents=True, exist_ok=True)
        config = resolve_config(home, args.config, args.gpus, args.cpus)
        if args.http is not None:
            try:
                split_listen(args.http)
            except ValueError as exc:
                raise ConfigError(f"--http {exc}") from None
            config.http = HttpListener(listen=args.http)
        used = args.config or paths.config_path(home)
        serve(home, config, used.absolute() if used.exists() else None)
    except PodiumError as exc:
        print(f"podium: {exc}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:  # whatever stops a start, `podium up` shows this line
        log.exception("the daemon could not start")
        print(f"podium: the daemon could not start: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
