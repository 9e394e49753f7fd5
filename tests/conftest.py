"""How the suite is spread over pytest-xdist workers (`--dist loadgroup`).

- **Groups.** Tests marked `xdist_group(NAME)` run in one worker, back to back: the
  Slurm modules that share a cluster of hosts are marked so. A test that uses a fixture
  made once per module (or class, or package), a daemon or a cluster the module's tests
  share, is put in its module's group: one worker runs the whole module, so the
  fixture is made once, as in a serial run. Every other test is a unit of its own that
  any worker may take. What a group starts lives in the worker's own ports and
  namespaces (tests.workers).
- **Quiet tests.** A test marked `quiet` measures time or bandwidth against a bound
  (a yardstick's floor, a straggler's ratio): on two cores shared with three busy
  workers every rank and link is slow and the bound means nothing. Its call runs
  alone: every test's call holds a shared lock on the machine, a quiet one an
  exclusive one (tests.workers.machine_lock), so it waits for a moment when no other
  test runs and none starts until it ends. flock lets shared holders overtake a
  waiting exclusive one, so a quiet test may wait minutes, but its worker alone
  waits: a turnstile that stopped new calls while it waited (tried) left three
  workers idle until the longest running call ended, and the run took far longer.
- **The scheduler.** pytest-xdist 3.8's own `loadgroup` tells the controller a test's
  group by renaming the test (`item._nodeid`), which pytest 9.2 no longer reads: every
  test then went out on its own and a module's cluster was started once per test. Here
  the workers write the groups to a file the controller names (`workerinput`) and the
  controller's scheduler, xdist's `LoadScopeScheduling`, reads a test's scope there.
- **Order.** Work goes out longest first: each group and each lone test is placed by
  the time it took last (tests/durations.json, written by `--record-durations`), so
  that the slow, wait-bound modules start at once and the short tests fill the gaps
  at the end. A test not in the file counts as a short one.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.workers import machine_lock

DURATIONS = Path(__file__).with_name("durations.json")
GROUPS_KEY = "podium_groups_file"
SHARED_SCOPES = {"module", "class", "package"}
UNKNOWN_S = 0.05  # not in durations.json: under 0.05 s when recorded, or new since


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--record-durations",
        action="store_true",
        help="write each test's time (setup + call + teardown) to tests/durations.json",
    )


def _shared_fixtures(item: pytest.Item) -> Iterator[str]:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return
    for name, defs in info.name2fixturedefs.items():
        if defs and defs[-1].scope in SHARED_SCOPES:
            yield name


def group_of(item: pytest.Item) -> str | None:
    """The xdist group `item` must share a worker with: the one it is marked with, else
    its module's path when it uses a fixture made once per module, class or package;
    None when any worker may run it."""
    marked = item.get_closest_marker("xdist_group")
    if marked is not None:
        return str(marked.args[0] if marked.args else marked.kwargs.get("name", "default"))
    if any(_shared_fixtures(item)):
        return item.nodeid.split("::", 1)[0]
    return None


def _recorded() -> dict[str, float]:
    try:
        data = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}


@pytest.hookimpl(tryfirst=True)  # the order and the marks, before other plugins look
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    recorded = _recorded()
    cost: dict[str, float] = {}  # per unit of work: a group, or a lone test's node id
    unit_of: dict[str, str] = {}
    groups: dict[str, str] = {}
    for item in items:
        group = group_of(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
            groups[item.nodeid] = group
        unit = group or item.nodeid
        unit_of[item.nodeid] = unit
        cost[unit] = cost.get(unit, 0.0) + recorded.get(item.nodeid, UNKNOWN_S)
    position = {nodeid: i for i, nodeid in enumerate(item.nodeid for item in items)}
    # Longest unit first; a unit's tests keep their written order, together.
    items.sort(
        key=lambda item: (-cost[unit_of[item.nodeid]], unit_of[item.nodeid], position[item.nodeid])
    )
    where = getattr(config, "workerinput", {}).get(GROUPS_KEY)
    if where:  # a worker: tell the controller's scheduler (every worker writes the same)
        fd, partial = tempfile.mkstemp(dir=os.path.dirname(where))
        with os.fdopen(fd, "w") as fh:
            json.dump(groups, fh)
        os.replace(partial, where)


class _Recorder:
    """Sums each test's phases as their reports come in (on the controller under xdist)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration

    @pytest.hookimpl
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(session.config, "workerinput"):  # a worker: the controller writes
            return
        kept = {k: round(v, 1) for k, v in sorted(self.seconds.items()) if v >= 0.05}
        DURATIONS.write_text(json.dumps(kept, indent=0, sort_keys=True) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    quiet = item.get_closest_marker("quiet") is not None
    with machine_lock("test-calls", shared=not quiet):
        yield


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--record-durations") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_Recorder(), "podium-durations")


_groups_dir: list[str] = []  # the controller's: the directory the workers write into


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist, on the controller, for each worker: where to write the groups."""
    if not _groups_dir:
        _groups_dir.append(tempfile.mkdtemp(prefix="podium-test-groups-"))
    node.workerinput[GROUPS_KEY] = os.path.join(_groups_dir[0], "groups.json")


def pytest_unconfigure(config: pytest.Config) -> None:
    for directory in _groups_dir:
        for name in os.listdir(directory):
            os.unlink(os.path.join(directory, name))
        os.rmdir(directory)
    _groups_dir.clear()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup`: xdist's scope scheduler, a scope being a test's group (the
    file the workers wrote) or the test alone."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # read once every worker has collected
                with open(os.path.join(_groups_dir[0], "groups.json")) as fh:
                    self.groups = json.load(fh)
            return self.groups.get(nodeid, nodeid)

    return GroupScheduling(config, log)
