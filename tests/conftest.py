"""Shared fixtures: a fresh registry per test, a helper to run worker scripts, the real
servers, and the two tiers.

``python -m pytest`` runs the default tier: no server, no browser, no long fault run, in
about two minutes on 2 cores. The system tier (``python -m pytest -m system``) is every
test marked ``pytest.mark.system``: explicitly (a module's ``pytestmark``) or here, for a
test that uses a server fixture, is parametrized on a server backend, or is in
``SYSTEM_MODULES``. The default run deselects it and says so in one line; a run that
names files, tests or a ``-m`` expression selects as asked.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any, NoReturn

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


# --- the two tiers ----------------------------------------------------------------
#: what the system tier needs (printed when the default run deselects it)
SYSTEM_NEEDS = ("redis-server, PostgreSQL (COREVO_TEST_PG_DSN, e.g. `. .ci/services.sh`), "
                "prometheus/promtool/alertmanager, chromium")
#: fixtures that start or reach a real server
SERVER_FIXTURES = frozenset({"redis_server", "redis_url", "pg_dsn", "cluster", "cluster_up",
                             "cluster3", "need_prometheus", "_need_prometheus"})
#: parametrized backends named after a server (test_claims' ``backend``, ...)
SERVER_PARAM = re.compile(r"redis|postgres|\bpg\b|cluster|sentinel")
#: what a parameter (test_doctests' blocks) ``needs`` that makes it a system test
SERVER_NEEDS = frozenset({"redis", "postgres"})
#: modules in the system tier as a whole: servers started inline (promtool, Prometheus,
#: Alertmanager, chromium, gunicorn/uvicorn fleets) or long fault runs
SYSTEM_MODULES: dict[str, str] = {
    "test_alert_precision.py": "prometheus, gunicorn workers",
    "test_claims_race.py": "process races with SIGSTOP/SIGKILL",
    "test_demo.py": "the multi-worker demo",
    "test_docs_site.py": "mkdocs build, chromium",
    "test_fault_cli.py": "fault run: hostile input, tmpfs",
    "test_fault_leases.py": "fault run: redis-server SIGKILL/SIGSTOP",
    "test_fault_mpdir.py": "fault run: tmpfs, read-only mounts",
    "test_fault_postgres.py": "fault run: PostgreSQL stop/freeze",
    "test_fault_postgres_async.py": "fault run: PostgreSQL stop/freeze",
    "test_fault_schedule.py": "fault run: a schedule of faults",
    "test_frozen_worker.py": "prometheus, uvicorn workers",
    "test_integrations_servers.py": "prometheus, gunicorn/uvicorn",
    "test_leases_cluster.py": "a Redis Cluster",
    "test_leases_sentinel.py": "Redis Sentinel",
    "test_leases_storm.py": "a storm of processes on redis-server",
    "test_lint_site_packages.py": "lints all of site-packages",
    "test_loadtest.py": "uvicorn/gunicorn fleets, chromium",
    "test_mpdir_churn.py": "1,000 SIGKILLed writers",
    "test_mpdir_crash.py": "SIGKILLed compactors",
    "test_mpdir_scrape.py": "writers under a scraper",
    "test_otel_system.py": "gunicorn workers, an OTLP receiver, prometheus",
    "test_precommit.py": "pre-commit builds hook environments",
    "test_prometheus_e2e.py": "prometheus",
    "test_pyspy.py": "py-spy on live processes",
    "test_stall_causes.py": "long stall runs with CPU hogs",
    # CLIs, servers or pytest itself in subprocesses, test after test (--durations)
    "test_contracts.py": "lint-imports in subprocesses",
    "test_export.py": "promtool; the CLI in subprocesses",
    "test_integrations_hostile.py": "uvicorn/aiohttp servers",
    "test_integrations_http.py": "uvicorn/aiohttp servers",
    "test_leases_audit_cli.py": "the CLI in subprocesses",
    "test_lint_observed.py": "the CLI in subprocesses",
    "test_loadtest_loopback.py": "a loadtest run",
    "test_monitor.py": "aiomonitor over telnet, frozen loops",
    "test_mpdir.py": "worker processes, the CLI",
    "test_multiprocess.py": "worker processes",
    "test_package.py": "builds a wheel",
    "test_pytest_plugin.py": "pytest in subprocesses",
    "test_sqlite_open.py": "processes racing to open a file",
}
#: single tests (file::function) over ~1 s, or needing a tool, in modules that stay
SYSTEM_TESTS: dict[str, str] = {
    "test_alerts.py::test_promtool_check_rules": "promtool",
    "test_alerts.py::test_promtool_unit_tests_pass": "promtool",
    "test_alerts.py::test_amtool_accepts_example_and_routes_by_severity": "amtool",
    "test_buckets.py::test_lag_alert_fires_with_custom_buckets": "promtool",
    "test_api_reference.py::test_every_public_name_is_in_the_reference": "pdoc build",
    "test_cancel.py::test_sigkilled_owner_frees_its_slot_at_lease_expiry_and_the_marker_"
    "expires": "SIGKILLed owner",
    "test_dashboards.py::test_cli_check_fails_when_stale": "the CLI in subprocesses",
    "test_dashboards.py::test_grafanalib_is_imported_only_to_build": "a fresh interpreter",
    "test_doctests.py::test_the_syntax_error_example_fails_the_lint": "the CLI",
    "test_exposition_scope.py::test_idle_connections_do_not_keep_threads": "idle timeouts",
    "test_imports.py::test_lint_loads_no_runtime_module": "fresh interpreters",
    "test_imports.py::test_pytest_plugin_loads_only_itself": "pytest in a subprocess",
    "test_leases_buffer.py::test_storm_with_buffers_on_the_cluster_never_oversells_work":
        "a Redis Cluster",
    "test_leases_observer.py::test_multiprocess_values_get_the_same_samples": "processes",
    "test_leases_provision.py::test_cli_bad_input_is_one_line_and_exit_2": "the CLI",
    "test_lint_cache.py::test_a_warm_run_parses_nothing_and_one_edit_parses_one_file": "CLI",
    "test_lint_cache.py::test_cli_cache_flags_and_environment": "the CLI",
    "test_lint_cache.py::test_parallel_cold_warm_and_edited_runs_report_what_an_uncached_"
    "run_does": "parallel CLI runs",
    "test_lint_cache.py::test_prune_keeps_this_runs_entries_and_drops_stale_temps": "the CLI",
    "test_lint_cli.py::test_a_sync_chain_3000_deep_is_followed_without_recursion": "3000 deep",
    "test_lint_cli.py::test_baseline_hides_legacy_and_only_shrinks": "the CLI",
    "test_lint_cli.py::test_every_finding_has_a_confidence_in_each_format": "the CLI",
    "test_lint_cli.py::test_namespace_packages_and_configured_src_roots": "the CLI",
    "test_lint_cli.py::test_parallel_run_is_byte_identical_on_chains_and_corpus": "--jobs",
    "test_lint_cli.py::test_select_ignore_and_exit_zero_flags": "the CLI",
    "test_lint_eval.py::test_flake8_async_figure_on_the_same_files": "flake8 on the corpus",
    "test_lint_installed.py::test_pyproject_key_and_cache": "the CLI",
    "test_lint_installed.py::test_the_cli_flag_and_a_missing_directory": "the CLI",
    "test_lint_newer.py::test_a_file_no_python_parses_names_both": "the newer Pythons",
    "test_lint_newer.py::test_pep695_file_is_analysed_through_the_newer_python": "Pythons",
    "test_lint_peers.py::test_the_corpus_is_found_exactly": "flake8-async and ruff",
    "test_settings_sources.py::test_capture_thread_counts_a_bad_pyspy_variable_and_keeps_"
    "the_host_running": "py-spy",
    "test_settings_sources.py::test_gunicorn_starts_on_bad_settings_and_serves_with_"
    "defaults": "gunicorn",
    "test_stall_ongoing.py::test_long_stall_is_logged_while_it_lasts_and_the_gauge_follows_"
    "it": "a long stall",
}


def _system_reason(item: pytest.Item) -> str | None:
    if item.get_closest_marker("system") is not None:
        return "marked"
    module = item.path.name
    if module in SYSTEM_MODULES:
        return SYSTEM_MODULES[module]
    test = f"{module}::{getattr(item, 'originalname', item.name)}"
    if test in SYSTEM_TESTS:
        return SYSTEM_TESTS[test]
    fixtures = set(getattr(item, "fixturenames", ()))
    if fixtures & SERVER_FIXTURES:
        return "server fixture"
    for value in getattr(getattr(item, "callspec", None), "params", {}).values():
        if isinstance(value, str) and SERVER_PARAM.search(value):
            return "server backend"
        if SERVER_NEEDS & set(getattr(value, "needs", ())):  # a doc block that says so
            return "server block"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    system = []
    for item in items:
        if _system_reason(item) is not None:
            item.add_marker(pytest.mark.system)
            system.append(item)
    whole_tree = not config.option.keyword and not config.option.file_or_dir
    if whole_tree:  # a renamed test or module must not fall back into the default tier
        seen = {item.path.name for item in items} | {
            f"{item.path.name}::{getattr(item, 'originalname', item.name)}" for item in items}
        stale = sorted((set(SYSTEM_MODULES) | set(SYSTEM_TESTS)) - seen)
        if stale:
            raise pytest.UsageError(f"tests/conftest.py names tests that do not exist: {stale}")
    if not whole_tree or config.option.markexpr or not system:
        return
    chosen = set(map(id, system))
    items[:] = [item for item in items if id(item) not in chosen]
    config.hook.pytest_deselected(items=system)
    config.stash[_FAST_TIER] = len(system)


_FAST_TIER = pytest.StashKey[int]()


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    deselected = config.stash.get(_FAST_TIER, None)
    if deselected is not None:
        terminalreporter.write_line(
            f"system tier: {deselected} tests deselected; they need {SYSTEM_NEEDS} "
            f"(long fault runs too): run them with `python -m pytest -m system`")


@pytest.hookimpl(tryfirst=True)
def pytest_fixture_setup(fixturedef: Any, request: pytest.FixtureRequest) -> None:
    """In the default tier a server fixture is a misfiled test: say which, loudly."""
    if fixturedef.argname in SERVER_FIXTURES and _FAST_TIER in request.config.stash:
        pytest.fail(f"{request.node.nodeid} uses {fixturedef.argname} but is not in the system "
                    "tier: mark it pytest.mark.system (tests/conftest.py)", pytrace=False)


# --- real servers -------------------------------------------------------------------
# CI (.ci/run) starts PostgreSQL and sets COREVO_REQUIRE_SERVERS=1, which turns a missing
# server into a failure instead of a skip. Redis is started per session on a free port.

def _need(reason: str) -> NoReturn:
    if os.environ.get("COREVO_REQUIRE_SERVERS") == "1":
        pytest.fail(f"required server unavailable: {reason}")
    pytest.skip(reason)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def redis_server():
    """A private redis-server on loopback; yields its URL."""
    import shutil
    import subprocess
    import time

    exe = shutil.which("redis-server")
    if exe is None:
        _need("redis-server not installed (apt-get install redis-server)")
    port = free_port()
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    import redis

    client = redis.Redis(port=port)
    for _ in range(100):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    else:
        proc.kill()
        _need("redis-server did not start")
    client.close()
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def redis_url(redis_server):
    """The session server, flushed for this test."""
    import redis

    client = redis.Redis.from_url(redis_server)
    client.flushall()
    client.close()
    return redis_server


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    dsn = os.environ.get("COREVO_TEST_PG_DSN")
    if not dsn:
        _need("COREVO_TEST_PG_DSN not set (source .ci/services.sh)")
    import psycopg

    try:
        psycopg.connect(dsn, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        _need(f"PostgreSQL at {dsn} not reachable: {exc}")
    return dsn
