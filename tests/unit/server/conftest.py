"""The server's unit tests share one harness: a real store and reactor over recorded
effects (tests/unit/server/harness.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.server.harness import Cluster


@pytest.fixture
def c(tmp_path: Path) -> Cluster:
    return Cluster(tmp_path)
