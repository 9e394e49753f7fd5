"""Imports flow one way (DESIGN.md's shape): a test that fails on an upward import or a
cycle, read from the package's source.

Each top-level part of `podium` has a rank; a module may import from its own part or
from parts of lower rank, never from a higher or equal one. Module-level imports must
also form no cycle between modules (imports inside functions, made lazily on purpose,
are exempt from the cycle check but not from the ranks).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "podium"

RANKS = {
    # the error hierarchy, then the shared vocabulary: import nothing else of Podium's
    "errors": -1,
    "api": 0,
    "paths": 0,
    "runtime": 0,
    # the cluster config, then the job spec read against it; the package's version
    "config": 1,
    "jobspec": 2,
    "__init__": 2,
    # pure policy, the database, the local executor: none of them knows the others
    "sched": 3,
    "store": 3,
    "run": 3,
    # the node (inventory, health checks); job steps inside a running job (srun)
    "node": 4,
    "jobsteps": 4,
    # what recovery does about a node's faults; trace replay through the same policy
    "recover": 5,
    "sim": 5,
    # the embedded daemon, and the backends: the CLI's side of each cluster
    "server": 6,
    "backends": 7,  # embedded/ talks to server/ over HTTP, never by import
    "cli": 8,
    "slurm_commands": 9,  # Slurm's commands over Podium: sbatch is podium submit
    "__main__": 9,
}


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path, top_level_only: bool) -> list[str]:
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found: list[str] = []
    for node in nodes:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("podium"):
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("podium")]
    return found


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts).removesuffix(".__init__")
        out[name] = path
    return out


def test_every_part_has_a_rank() -> None:
    parts = {_part(m) for m in _modules()}
    assert parts <= set(RANKS), f"give these a rank: {sorted(parts - set(RANKS))}"


def test_no_upward_import() -> None:
    wrong = []
    for module, path in _modules().items():
        mine = _part(module)
        for target in _imports(path, top_level_only=False):
            theirs = _part(target)
            if theirs != mine and RANKS[theirs] >= RANKS[mine]:
                wrong.append(f"{module} imports {target} ({mine} may not import {theirs})")
    assert wrong == []


# Parts a part may not import although they rank below it: a backend talks to the
# embedded daemon over HTTP (embedded/), never by importing it (docs/architecture.md).
NEVER = {"backends": {"server"}}


def test_no_backend_imports_the_daemon() -> None:
    wrong = [
        f"{module} imports {target}"
        for module, path in _modules().items()
        for target in _imports(path, top_level_only=False)
        if _part(target) in NEVER.get(_part(module), set())
    ]
    assert wrong == []


def test_no_import_cycle() -> None:
    modules = _modules()
    graph = {
        m: [t for t in _imports(p, top_level_only=True) if t in modules and t != m]
        for m, p in modules.items()
    }
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(m: str, path: list[str]) -> list[str] | None:
        state[m] = 1
        for t in graph[m]:
            if state.get(t) == 1:
                return [*path, m, t]
            if t not in state and (cycle := visit(t, [*path, m])):
                return cycle
        state[m] = 2
        return None

    for m in graph:
        if m not in state and (cycle := visit(m, [])):
            raise AssertionError("import cycle: " + " -> ".join(cycle))


# The roles every engine's backend folder (podium/backends/<engine>/) names alike, so
# that a reader of one knows where to look in another (docs/architecture.md, "Adding
# a backend"): the Backend, its admission, the engine's API, the spec translated for
# the engine, the engine's output parsed into records, team quotas.
BACKEND_ROLES = ("backend", "admission", "engine_api", "translate", "parse", "teams")


def test_no_module_name_is_repeated_across_packages() -> None:
    # A name says what a module does: two modules of one name in different packages
    # (tools.py, records.py, ...) make a reader open both to learn which is meant. The
    # backend roles are the one exception, and only inside podium/backends/<engine>/.
    seen: dict[str, list[str]] = {}
    for module, path in _modules().items():
        leaf = module.rsplit(".", 1)[-1]
        if path.stem in ("__init__", "__main__") or module.count(".") <= 1:
            continue
        role = leaf in BACKEND_ROLES and module.startswith("podium.backends.")
        seen.setdefault(f"{leaf} (backend role)" if role else leaf, []).append(module)
    assert {n: ms for n, ms in seen.items() if len(ms) > 1 and "role" not in n} == {}
    outside = [m for n, ms in seen.items() if "role" not in n and n in BACKEND_ROLES for m in ms]
    assert outside == [], f"a backend role's name used outside podium/backends/: {outside}"


def test_the_engine_backends_name_their_roles_alike() -> None:
    engines = [p for p in (PACKAGE / "backends").iterdir() if (p / "backend.py").exists()]
    assert {p.name for p in engines} >= {"slurm", "kubernetes"}
    for engine in engines:
        missing = [r for r in BACKEND_ROLES if not (engine / f"{r}.py").exists()]
        assert missing == [], f"backends/{engine.name}/ lacks {missing}"


def test_only_the_daemon_entry_knows_http() -> None:
    # server/http/ turns requests into calls on the daemon's views, intake and control;
    # the rest of server/ knows nothing of HTTP (docs/architecture.md).
    knowing = sorted(
        module
        for module, path in _modules().items()
        if module.startswith("podium.server.")
        and not module.startswith("podium.server.http")
        and any(
            isinstance(node, ast.ImportFrom)
            and (node.module or "").startswith("podium.server.http")
            for node in ast.walk(ast.parse(path.read_text()))
        )
    )
    assert knowing == ["podium.server.daemon"]


def test_every_backend_meets_the_conformance_check_live() -> None:
    # Each backend answers --test-only, bad input and unknown jobs alike on its real
    # engine (tests/integration/conformance.py); a backend added to BACKENDS without
    # a live check fails here.
    from podium.backends import BACKENDS
    from tests.integration.conformance import LIVE

    assert set(LIVE) == set(BACKENDS)
    for engine, module in LIVE.items():
        text = (PACKAGE.parent / module).read_text()
        assert "check_backend(" in text, f"{module} never runs the check for {engine}"
