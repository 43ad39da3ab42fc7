"""Shared fixtures: a fresh registry per test, and a helper to run worker scripts."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

HELPERS = Path(__file__).parent / "helpers"


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def worker_env(tmp_path: Path) -> dict[str, str]:
    """Environment for a child worker: multiprocess dir in tmp, this checkout importable."""
    mp = tmp_path / "metrics"
    mp.mkdir()
    env = dict(os.environ)
    env["PROMETHEUS_MULTIPROC_DIR"] = str(mp)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent.parent), str(HELPERS)])
    env.pop("COREVO_WORKER", None)
    return env


def helper_cmd(name: str, *args: str) -> list[str]:
    return [sys.executable, str(HELPERS / name), *args]
