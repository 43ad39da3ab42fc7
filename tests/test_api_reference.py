"""The API reference is generated from the docstrings by pdoc (offline), and every public
name of every public namespace is in it. docs/api.md says how to build it and lists the
same namespaces (checked here too), so a new namespace cannot go undocumented.
"""

from __future__ import annotations

import importlib
import inspect
import re
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: the public namespaces: importing anything else is not promised
PUBLIC = (
    "corevo_obs",
    "corevo_obs.loop",
    "corevo_obs.stages",
    "corevo_obs.offload",
    "corevo_obs.leases",
    "corevo_obs.claims",
    "corevo_obs.events",
    "corevo_obs.cancel",
    "corevo_obs.otel",
    "corevo_obs.core.identity",
    "corevo_obs.core.marker",
    "corevo_obs.core.settings",
    "corevo_obs.integrations.asgi",
    "corevo_obs.integrations.aiohttp_web",
    "corevo_obs.integrations.http_clients",
    "corevo_obs.integrations.gunicorn",
    "corevo_obs.integrations.worker_slots",
    "corevo_obs.integrations.request_start",
)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import pdoc
    out = tmp_path_factory.mktemp("api")
    for module in PUBLIC:  # lazily resolved names (PEP 562) become real attributes first
        mod = importlib.import_module(module)
        for name in getattr(mod, "__all__", ()):
            getattr(mod, name)
    pdoc.pdoc(*PUBLIC, output_directory=out)
    return out


def _page(out: Path, module: str) -> str:
    parts = module.split(".")
    page = out.joinpath(*parts[:-1], parts[-1] + ".html")
    if not page.exists():  # a package's page
        page = out.joinpath(*parts) / "index.html"
    return page.read_text()


@pytest.mark.parametrize("module", PUBLIC)
def test_every_public_name_is_in_the_reference(reference: Path, module: str) -> None:
    names = getattr(importlib.import_module(module), "__all__", None)
    if module == "corevo_obs.core.settings":
        names = ["option", "resolve"]
    assert names, f"{module} declares no __all__: its public names are not stated"
    html = _page(reference, module)
    missing = [n for n in names if f'id="{n}"' not in html]
    assert not missing, f"{module}: not in the API reference: {missing}"


def test_docs_api_lists_every_public_namespace() -> None:
    text = (ROOT / "docs" / "api.md").read_text()
    listed = set(re.findall(r"`(corevo_obs[\w.]*)`", text))
    assert set(PUBLIC) <= listed, sorted(set(PUBLIC) - listed)


def documented_purposes() -> dict[str, dict[str, str]]:
    """docs/api.md's "Every public name": namespace -> {name: its one purpose}, in page
    order (a ``### `namespace``` heading, then one ``| `name` | purpose |`` row each)."""
    text = (ROOT / "docs" / "api.md").read_text()
    section = text.split("## Every public name", 1)[1].split("\n## ", 1)[0]
    found: dict[str, dict[str, str]] = {}
    for block in section.split("\n### ")[1:]:
        heading, _, body = block.partition("\n")
        module = re.fullmatch(r"`(corevo_obs[\w.]*)`", heading.strip())
        assert module, f"not a namespace heading: {heading!r}"
        rows = re.findall(r"^\| `(\w+)` \| (.*) \|$", body, re.MULTILINE)
        found[module.group(1)] = dict(rows)
    return found


def _documented_names() -> dict[str, set[str]]:
    return {module: set(rows) for module, rows in documented_purposes().items()}


def test_every_public_name_has_one_stated_purpose_and_the_count_is_todays() -> None:
    """Each name's row says what it is for, and the page states today's count against
    0.2.0's (127 names in 17 namespaces)."""
    empty = [f"{m}.{n}" for m, rows in documented_purposes().items()
             for n, purpose in rows.items() if len(purpose.strip()) < 10]
    assert not empty, f"no purpose stated: {empty}"
    names = sum(len(importlib.import_module(m).__all__) for m in PUBLIC)
    text = (ROOT / "docs" / "api.md").read_text()
    stated = re.search(r"\*\*(\d+) names in (\d+) namespaces\*\* \(0\.2\.0: 127 in 17\)", text)
    assert stated, "docs/api.md does not state the count against 0.2.0's"
    assert (int(stated.group(1)), int(stated.group(2))) == (names, len(PUBLIC)), (
        f"docs/api.md says {stated.group(0)}; today: {names} names in {len(PUBLIC)}")


def test_docs_api_lists_every_public_name_and_no_other() -> None:
    documented = _documented_names()
    assert set(documented) == set(PUBLIC), set(documented) ^ set(PUBLIC)
    for module in PUBLIC:
        public = set(importlib.import_module(module).__all__)
        assert documented[module] == public, (
            f"{module}: undocumented {sorted(public - documented[module])}, "
            f"documented but not public {sorted(documented[module] - public)}")


#: the public callables that write series of their own: each takes ``worker=`` (the label)
#: and ``registry=`` (where the series go), keyword-only, default None, worker first
SERIES_WRITERS = {
    "corevo_obs": ("LoopHealth", "install_loop_health", "StageRecorder",
                   "track_task", "OffloadAdapter", "MetricsObserver"),
    "corevo_obs.loop": ("LoopLagSampler", "StallWatchdog"),
    "corevo_obs.leases": ("LeaseStore", "AsyncLeaseStore", "SqliteLeaseStore",
                          "AsyncSqliteLeaseStore", "RedisLeaseStore", "AsyncRedisLeaseStore",
                          "ShardedLeaseStore", "AsyncShardedLeaseStore", "CircuitBreaker"),
    "corevo_obs.claims": ("JobStore", "AsyncJobStore", "SqliteJobStore", "AsyncSqliteJobStore",
                          "PostgresJobStore", "AsyncPostgresJobStore"),
    "corevo_obs.events": ("Projector",),
    "corevo_obs.otel": ("CountedExporter",),
    "corevo_obs.integrations.asgi": ("StagesMiddleware",),
    "corevo_obs.integrations.aiohttp_web": ("install_stages",),
}
#: public callables with a parameter named worker or registry that is not "who reports"
OTHER_MEANING = {
    "corevo_obs.MetricsServer": "registry= is the registry it serves, it writes none",
    "corevo_obs.loop.StallReport": "a record: the worker that stalled",
    "corevo_obs.leases.HolderId": "a record: the worker part of a holder id",
    "corevo_obs.otel.worker_resource": "the resource's corevo.worker attribute, no series",
    "corevo_obs.otel.ExemplarPrometheusReader": "registry= is the registry it serves",
    "corevo_obs.core.settings.resolve_in_host": "process settings, counted before a worker",
    "corevo_obs.integrations.gunicorn.master_settings": "the master's settings, no worker",
    "corevo_obs.integrations.gunicorn.pre_fork": "gunicorn's worker object",
    "corevo_obs.integrations.gunicorn.post_fork": "gunicorn's worker object",
    "corevo_obs.integrations.gunicorn.child_exit": "gunicorn's worker object",
}


def test_every_series_writer_takes_worker_and_registry_keyword_only() -> None:
    """One way to say who reports (issue 26): no ``telemetry=`` anywhere public, and the same
    two keywords, same kind, same defaults, same order, on every documented series writer."""
    documented = _documented_names()
    for module, listed in SERIES_WRITERS.items():
        assert set(listed) <= documented[module], set(listed) - documented[module]
    writers = {id(getattr(importlib.import_module(m), n)) for m, ns in SERIES_WRITERS.items()
               for n in ns}
    other = {id(getattr(importlib.import_module(w.rsplit(".", 1)[0]), w.rsplit(".", 1)[1]))
             for w in OTHER_MEANING}
    wrong: list[str] = []
    for module, names in sorted(documented.items()):
        for name in sorted(names):
            obj = getattr(importlib.import_module(module), name)
            if not callable(obj):
                continue
            try:
                params = inspect.signature(obj).parameters
            except ValueError:  # a builtin base without a signature (an exception class)
                continue
            where = f"{module}.{name}"
            if "telemetry" in params:
                wrong.append(f"{where}: telemetry=")
            if id(obj) in writers:
                order = list(params)
                for key in ("worker", "registry"):
                    p = params.get(key)
                    if p is None or p.kind is not p.KEYWORD_ONLY or p.default is not None:
                        wrong.append(f"{where}: {key}= not keyword-only with default None")
                if {"worker", "registry"} <= set(order) and (
                        order.index("worker") > order.index("registry")):
                    wrong.append(f"{where}: registry= before worker=")
            elif ({"worker", "registry"} & set(params)) and id(obj) not in other:
                wrong.append(f"{where}: worker/registry but not listed as a series writer")
    assert not wrong, wrong


def test_every_series_writer_shows_worker_and_registry_read_only() -> None:
    """Who reports is read back as ``.worker`` / ``.registry``: read-only properties on every
    series writer (a function, on the component it returns: ``install_loop_health`` a
    ``LoopHealth``, ``install_stages`` a ``StageRecorder``; ``track_task`` returns a
    decorator, its recorder is a ``StageRecorder``). That no instance shows a
    ``.telemetry`` any more is checked on built components in test_telemetry.py."""
    wrong: list[str] = []
    checked: set[type] = set()
    for module, names in SERIES_WRITERS.items():
        for name in names:
            obj = getattr(importlib.import_module(module), name)
            if not inspect.isclass(obj):
                obj = typing.get_type_hints(obj).get("return")
                if not inspect.isclass(obj):
                    continue
            checked.add(obj)
            for key in ("worker", "registry"):
                found = inspect.getattr_static(obj, key, None)
                if not isinstance(found, property) or found.fset is not None:
                    wrong.append(f"{module}.{name}: .{key} is not a read-only property")
    assert len(checked) >= 20, sorted(c.__name__ for c in checked)
    assert not wrong, wrong


#: public on their own pages (docs/api.md, "Also public"): each states its ``__all__``
ALSO_PUBLIC = (
    "corevo_obs.integrations.pytest_plugin",
    "corevo_obs.integrations.monitor",
    "corevo_obs.integrations.pyspy",
    "corevo_obs.mpdir",
)


def test_every_error_the_library_raises_is_importable_from_a_documented_namespace() -> None:
    """A host catches what it can import: every ``CorevoObsError`` the library defines
    (the CLI's own tooling aside) is in the ``__all__`` of a public namespace."""
    import pkgutil

    import corevo_obs
    from corevo_obs.core.errors import CorevoObsError

    exported = {getattr(importlib.import_module(m), n) for m in (*PUBLIC, *ALSO_PUBLIC)
                for n in importlib.import_module(m).__all__}
    defined: dict[str, type] = {}
    for info in pkgutil.walk_packages(corevo_obs.__path__, "corevo_obs."):
        if info.name.startswith(("corevo_obs.tooling", "corevo_obs.demo", "corevo_obs.cli",
                                 "corevo_obs.loadtest")):
            continue  # the CLI and its tools report errors as lines, a host imports none
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional backend not installed here
            continue
        for value in vars(module).values():
            if (inspect.isclass(value) and issubclass(value, CorevoObsError)
                    and value.__module__ == info.name):
                defined[f"{info.name}.{value.__name__}"] = value
    assert len(defined) >= 20, sorted(defined)
    missing = sorted(path for path, cls in defined.items() if cls not in exported)
    assert not missing, f"raised but importable from no public __all__: {missing}"


def test_conflicting_arguments_raise_config_error(tmp_path: Path) -> None:
    """An argument that another one would silently override is refused at the call."""
    from prometheus_client import CollectorRegistry

    from corevo_obs import ConfigError, StageRecorder, track_task
    from corevo_obs.integrations.aiohttp_web import install_stages
    from corevo_obs.integrations.asgi import StagesMiddleware
    from corevo_obs.leases import (
        AsyncLeaseAuditor,
        AsyncSqliteLeaseStore,
        LeaseAuditor,
        SqliteLeaseStore,
    )

    rec = StageRecorder(worker="a", registry=CollectorRegistry())

    async def app(scope: Any, receive: Any, send: Any) -> None: ...

    calls: dict[str, Callable[[], object]] = {
        "StagesMiddleware": lambda: StagesMiddleware(app, recorder=rec, worker="b"),
        "install_stages": lambda: install_stages(object(), recorder=rec,
                                                 registry=CollectorRegistry()),
        "track_task": lambda: track_task("k", recorder=rec, worker="b"),
    }
    for source, call in calls.items():
        with pytest.raises(ConfigError, match=r"recorder= and .* conflict") as caught:
            call()
        assert caught.value.source == source
    from corevo_obs import MetricsServer
    for conflict in ({"scope": "host"}, {"by_worker": True}):
        with pytest.raises(ConfigError, match="conflict"):
            MetricsServer(registry=CollectorRegistry(), **conflict)  # type: ignore[arg-type]
    MetricsServer(registry=CollectorRegistry())
    StagesMiddleware(app, recorder=rec)  # either alone is fine
    StagesMiddleware(app, worker="b", registry=CollectorRegistry())
    sync = SqliteLeaseStore("q", tmp_path / "l.db", limit=1, registry=CollectorRegistry())
    asyn = AsyncSqliteLeaseStore("q", tmp_path / "l.db", limit=1, registry=CollectorRegistry())
    with pytest.raises(ConfigError, match="use AsyncLeaseAuditor"):
        LeaseAuditor(asyn)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="use LeaseAuditor"):
        AsyncLeaseAuditor(sync)  # type: ignore[arg-type]
    sync.close()
