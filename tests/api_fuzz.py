"""A bounded fuzz run of the daemon's REST API over its Unix socket (issue 26, item 7).

    python -m tests.api_fuzz [--examples N] [--seed S] [--user NAME]

starts a real daemon (4 declared GPUs, a few jobs of its own in the queue), reads its
OpenAPI document through the socket and sends every operation schemathesis' cases,
valid and invalid (N of each kind per operation), plus malformed bodies, paths and
methods no schema describes. It runs as this process's user (as root: the
administrator, every route but /v1/shutdown) and, with --user (or as root when the
test suite's second user exists), again as that user in a process of its own.

A run fails when any answer is a 5xx, or an error whose body is not Podium's
{"error": "one line"}. It prints the requests sent by status and each failure.
`--socket PATH` fuzzes a daemon already running (what the second user's pass does).
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import subprocess
import sys
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

SECOND_USER = "podium-test"  # the integration tests' second user
SKIP_AS_ADMIN = {("POST", "/v1/shutdown")}  # it would end the run, not test it
# Bodies no JSON schema produces: truncated, not UTF-8, not an object, huge numbers.
RAW_BODIES = (
    b"{",
    b"\xff\xfe\x00",
    b"[]",
    b"null",
    b'"text"',
    b'{"job_ids": [1e999]}',
    b'{"job_ids": [' + str(2**70).encode() + b"]}",
    b'{"time_limit_s": ' + str(2**64).encode() + b"}",
    b'{"options": ["--gpus", "' + b"9" * 400 + b'"], "cwd": "/"}',
    b'{"gpu": -1, "layout": "' + b"x" * 5000 + b'"}',
    b"{" + b'"a":' * 50 + b"1}",
)
RAW_PATHS = (
    ("GET", "/v1/jobs/" + str(2**63)),
    ("GET", "/v1/jobs/1?task=" + str(2**63)),
    ("GET", "/v1/jobs/%00"),
    ("GET", "/v1/jobs?state=ALL,%FF"),
    ("GET", "/v1/acct?since=1e999&until=-1e999"),
    ("GET", "/v1/acct?since=nan"),
    ("POST", "/v1/nodes/..%2F..%2Fetc/drain"),
    ("GET", "/v1/no-such-route"),
    ("DELETE", "/v1/jobs/1"),
    ("PUT", "/v1/ping"),
)


@dataclass
class Report:
    """What a run sent and what went wrong."""

    statuses: Counter[int] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    @property
    def sent(self) -> int:
        return sum(self.statuses.values())

    def merge(self, other: Report) -> None:
        self.statuses.update(other.statuses)
        self.failures.extend(other.failures)

    def to_json(self) -> dict[str, Any]:
        return {
            "sent": self.sent,
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
            "failures": self.failures,
        }


def _judge(report: Report, what: str, response: httpx.Response) -> None:
    report.statuses[response.status_code] += 1
    if response.status_code >= 500:
        report.failures.append(f"{what} -> {response.status_code}: {response.text[:300]}")
        return
    if response.status_code < 400:
        return
    try:
        body = response.json()
    except ValueError:
        body = None
    message = body.get("error") if isinstance(body, dict) else None
    if not (isinstance(message, str) and message and "\n" not in message and len(body) == 1):
        report.failures.append(
            f"{what} -> {response.status_code} not {{'error': one line}}: {response.text[:300]}"
        )


class Sender:
    """Sends requests over the socket; a connection the daemon drops is a failure, and
    the next request opens a new one."""

    def __init__(self, socket_path: str, report: Report) -> None:
        self.socket_path, self.report = socket_path, report
        self.client = self._client()

    def _client(self) -> httpx.Client:
        transport = httpx.HTTPTransport(uds=self.socket_path)
        return httpx.Client(transport=transport, base_url="http://podium", timeout=60)

    def send(self, what: str, method: str, url: str, **kwargs: Any) -> None:
        try:
            response = self.client.request(method, url, **kwargs)
        except httpx.TransportError as exc:
            self.report.failures.append(f"{what} -> the connection dropped: {exc}")
            self.client.close()
            self.client = self._client()
            return
        _judge(self.report, what, response)


def fuzz(socket_path: str, examples: int, seed: int) -> Report:
    """Fuzz the daemon at `socket_path` as this process's user; see the module."""
    import schemathesis
    from hypothesis import HealthCheck, errors, given, settings
    from hypothesis import seed as with_seed
    from schemathesis import GenerationMode

    report = Report()
    sender = Sender(socket_path, report)
    client = sender.client
    admin = bool(client.get("/v1/ping").json().get("admin"))
    document = client.get("/openapi.json").json()
    schema = schemathesis.openapi.from_dict(document)
    operations = [r.ok() for r in schema.get_all_operations()]
    for op in operations:
        method, path = op.method.upper(), op.path
        if admin and (method, path) in SKIP_AS_ADMIN:
            continue
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @with_seed(seed)
            @settings(
                max_examples=examples,
                database=None,
                deadline=None,
                suppress_health_check=list(HealthCheck),
            )
            @given(op.as_strategy(generation_mode=mode))
            def send(case: Any) -> None:
                kwargs = case.as_transport_kwargs(base_url="http://podium")
                kwargs.pop("cookies", None)
                body = kwargs.pop("json", None)
                if body is not None:
                    kwargs["content"] = json.dumps(body).encode()
                elif "data" in kwargs:
                    data = kwargs.pop("data")
                    kwargs["content"] = data if isinstance(data, bytes) else str(data).encode()
                sender.send(f"{kwargs['method']} {kwargs['url']}", **kwargs)

            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    send()
            except errors.Unsatisfiable:
                pass  # nothing invalid can be made of it (a route with no input)
        if method == "POST":
            for raw in RAW_BODIES:
                url = path.replace("{job_id}", "1").replace("{node}", "node0")
                if admin and (method, url) in SKIP_AS_ADMIN:
                    continue
                for kind in ("application/json", "text/plain"):
                    what = f"POST {url} {raw[:40]!r} as {kind}"
                    sender.send(what, "POST", url, content=raw, headers={"Content-Type": kind})
    for method, path in RAW_PATHS:
        sender.send(f"{method} {path}", method, path)
    sender.client.close()
    return report


def _as_user(user: str, socket_path: str, examples: int, seed: int) -> Report:
    """The same run as `user`, in a process of its own (the socket knows who calls)."""
    entry = pwd.getpwnam(user)
    import site

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    python = next(
        (p for p in (sys.executable, f"/usr/bin/python3.{sys.version_info.minor}")
         if os.access(p, os.X_OK) and _runs_as(p, entry.pw_uid)),
        sys.executable,
    )  # fmt: skip
    done = subprocess.run(
        [python, "-m", "tests.api_fuzz", "--socket", socket_path, "--examples", str(examples),
         "--seed", str(seed), "--json"],
        capture_output=True, text=True, cwd=here, user=entry.pw_uid, group=entry.pw_gid,
        extra_groups=os.getgrouplist(user, entry.pw_gid),
        env={"PATH": "/usr/bin:/bin", "HOME": "/tmp",
             "PYTHONPATH": os.pathsep.join([here, *site.getsitepackages()])},
    )  # fmt: skip
    report = Report()
    try:
        data = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        report.failures.append(f"the run as {user} failed: {done.stderr.strip()[-500:]}")
        return report
    report.statuses.update({int(k): v for k, v in data["statuses"].items()})
    report.failures.extend(data["failures"])
    return report


def _runs_as(python: str, uid: int) -> bool:
    try:
        probe = subprocess.run([python, "-c", "pass"], user=uid, capture_output=True)
    except OSError:
        return False
    return probe.returncode == 0


def run(examples: int, seed: int, user: str | None) -> Report:
    """Start a daemon, fuzz it as this process's user and as `user`, stop it."""
    from tests.integration.conftest import make_cluster, teardown_cluster

    c = make_cluster()
    c.start()
    try:
        for args in (["--hold", "--wrap", "true"], ["-G", "1", "--wrap", "sleep 300"]):
            c.cli("submit", *args, check=True)
        socket_path = str(c.home / "podium.sock")
        report = fuzz(socket_path, examples, seed)
        if user is not None:
            report.merge(_as_user(user, socket_path, examples, seed))
        if not c.alive():
            report.failures.append("the daemon stopped answering")
        return report
    finally:
        teardown_cluster(c)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.api_fuzz", description=__doc__)
    parser.add_argument("--examples", type=int, default=100, help="cases per operation and kind")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--user", help="also fuzz as this Unix user")
    parser.add_argument("--socket", help="fuzz the daemon already at this socket")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    if args.socket:
        report = fuzz(args.socket, args.examples, args.seed)
    else:
        user = args.user
        if user is None and os.geteuid() == 0:
            try:
                pwd.getpwnam(SECOND_USER)
                user = SECOND_USER
            except KeyError:
                user = None
        report = run(args.examples, args.seed, user)
    if args.json:
        print(json.dumps(report.to_json()))
    else:
        statuses = ", ".join(f"{k}: {v}" for k, v in sorted(report.statuses.items()))
        print(f"{report.sent} requests ({statuses}); {len(report.failures)} failure(s)")
        for failure in report.failures:
            print(f"  {failure}")
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
