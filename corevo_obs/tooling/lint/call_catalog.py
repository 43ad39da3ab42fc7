"""The blocking-call catalog: blocking names, blocking object types, offloads.

It is data (``lint_rules/blocking_calls.toml``, packaged next to this module) merged with
the project's config, so rules never hard-code an API name. Rule codes and their texts
live in the rule registry (``rules/base.py``); the catalog only refers to them.
"""

from __future__ import annotations

import dataclasses
import functools
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from ...core.errors import ConfigError
from .config import LintConfig
from .rules.base import RULES, Selection

CATALOG_FILE = "blocking_calls.toml"
MARKERS = ("corevo_obs.blocking", "corevo_obs.core.marker.blocking")


@dataclass(frozen=True)
class ObjectRule:
    """Methods of one type that block; ``methods=None`` means all but ``except_``.
    ``why``: the ``{why}`` of a COB111 (declared-blocking) message, e.g. what to await
    instead."""

    type: str
    code: str
    methods: frozenset[str] | None
    except_: frozenset[str] = frozenset()
    why: str = ""

    def blocks(self, method: str) -> bool:
        if self.methods is None:
            return not method.startswith("_") and method not in self.except_
        return method in self.methods


TlsSpots = tuple[tuple[int | str, ...], tuple[int | str, ...]]  # (ssl argument, URL argument)


@dataclass
class Catalog:
    calls: dict[str, str]
    objects: dict[str, ObjectRule]
    factories: dict[str, str]  # call qualified name -> type it returns
    offload: dict[str, int]
    offload_methods: dict[str, int]
    disarming: dict[str, frozenset[str]] = field(default_factory=dict)  # call -> flags
    aliases: dict[str, str] = field(default_factory=dict)  # annotation type -> tracked type
    after: dict[str, frozenset[str]] = field(default_factory=dict)  # T.wait -> {communicate}
    in_memory_args: dict[str, tuple[int | str, ...]] = field(default_factory=dict)
    in_memory_types: frozenset[str] = frozenset()
    in_memory_names: frozenset[str] = frozenset()  # file names that are no file (":memory:")
    in_memory_streams: frozenset[str] = frozenset()  # sys.stdout: a terminal or pipe, no disk
    data_urls: dict[str, tuple[int | str, ...]] = field(default_factory=dict)
    first_use: frozenset[str] = frozenset()  # block on first use only: low confidence
    per_process: frozenset[str] = frozenset()  # first-use loaders a chain reaches at medium
    zero_timeout: dict[str, tuple[int | str, ...]] = field(default_factory=dict)
    # writer -> position / keyword of its target: given none, it returns the data instead
    no_target: dict[str, tuple[int | str, ...]] = field(default_factory=dict)
    # T.get -> {empty, qsize}: called after one of these on the same receiver, the call
    # was probably checked not to wait (a guess: medium)
    checked: dict[str, frozenset[str]] = field(default_factory=dict)
    # call -> positions of its file argument (None: takes descriptors only); see [descriptors]
    fd_args: dict[str, tuple[int | str, ...] | None] = field(default_factory=dict)
    fd_factories: frozenset[str] = frozenset()
    pipes: frozenset[str] = frozenset()
    pipe_writes: frozenset[str] = frozenset()
    # method -> "T.method" for the blocking methods of a type marked ``distinctive``: no
    # other type has them, so they are taken as T's on a receiver the lint cannot type
    distinctive: dict[str, str] = field(default_factory=dict)
    # call -> keywords (and positions) that, given anything but True / None / a string,
    # skip its blocking work
    disarming_keywords: dict[str, frozenset[int | str]] = field(default_factory=dict)
    # code the loop itself calls: method name -> index of the callable it schedules
    # (``loop.call_soon(cb)``), and the protocol classes whose callbacks it runs
    loop_callbacks: dict[str, int] = field(default_factory=dict)
    protocol_types: frozenset[str] = frozenset()
    protocol_methods: frozenset[str] = frozenset()
    # coroutine functions that do sync I/O before they first suspend: awaiting one still
    # blocks the loop (pyserial-asyncio opens the port in the caller's thread)
    awaited_blocking: frozenset[str] = frozenset()
    # connection calls that build a new default SSL context (the CA bundle read from disk)
    # per connection: name (or, in ``default_tls_methods``, method name on any receiver)
    # -> (spots of the ssl argument, spots of the URL argument); see [default-tls]
    default_tls: dict[str, TlsSpots] = field(default_factory=dict)
    default_tls_methods: dict[str, TlsSpots] = field(default_factory=dict)
    # "T.attr" -> the type of that attribute (``path.parent``: a path), and "T.method" ->
    # the type of the items it returns (``path.glob("*")``: paths)
    attributes: dict[str, str] = field(default_factory=dict)
    elements: dict[str, str] = field(default_factory=dict)
    # "T.method" that only makes a generator (``path.glob("*")``): the I/O runs as it is
    # iterated, so a call whose result is only stored does not block
    generators: frozenset[str] = frozenset()
    # generated client stubs: (code, module-name suffixes, class-name suffixes); a method
    # attribute of one is a call on its channel (``*_pb2_grpc.FooStub``: gRPC's)
    stubs: tuple[str, tuple[str, ...], tuple[str, ...]] | None = None
    # factory -> keywords that build the object in a non-blocking mode (psycopg2's
    # ``async_=True``): its methods then return at once, so the object is not tracked
    modes: dict[str, frozenset[str]] = field(default_factory=dict)

    @functools.cached_property
    def after_methods(self) -> frozenset[str]:
        """The methods whose earlier call on a receiver the scan remembers (``seen``)."""
        return frozenset(m for table in (self.after, self.checked) for ms in table.values()
                         for m in ms)

    @functools.cached_property
    def loop_needles(self) -> tuple[bytes, ...]:
        """What a file must spell to run code on the loop without an ``async def``."""
        return tuple(n.encode() for n in (*self.loop_callbacks, *self.protocol_methods))

    @functools.cached_property
    def all_disarming(self) -> frozenset[str]:
        """Every flag some entry names (each part of an ``a+b`` entry)."""
        return frozenset(part for fs in self.disarming.values() for f in fs
                         for part in f.split("+"))

    @functools.cached_property
    def disarming_names(self) -> frozenset[str]:
        """Every keyword some constructor's ``[disarming-keywords]`` entry names."""
        return frozenset(k for spots in self.disarming_keywords.values() for k in spots
                         if isinstance(k, str))
    blocking: frozenset[str] = frozenset()
    non_blocking: frozenset[str] = frozenset()
    non_blocking_prefixes: tuple[str, ...] = ()
    markers: frozenset[str] = frozenset(MARKERS)
    selection: Selection = field(default_factory=Selection)

    def is_non_blocking(self, qualname: str) -> bool:
        return qualname in self.non_blocking or qualname.startswith(self.non_blocking_prefixes)

    def with_config(self, config: LintConfig) -> Catalog:
        """A copy extended by the project's config (config wins over the shipped data)."""
        calls = dict(self.calls)
        for code, names in config.extend_calls.items():
            if code not in RULES:
                raise ConfigError(f"extend-calls: unknown rule code {code}", source=config.source)
            calls.update(dict.fromkeys(names, code))
        exact = {n for n in config.non_blocking if not n.endswith(".*")}
        prefixes = tuple(n[:-1] for n in config.non_blocking if n.endswith(".*"))
        return dataclasses.replace(
            self,
            calls=calls,
            offload={**self.offload, **config.offload},
            offload_methods={**self.offload_methods, **config.offload_methods},
            blocking=frozenset(config.blocking),
            non_blocking=frozenset(exact),
            non_blocking_prefixes=prefixes,
            markers=frozenset(MARKERS) | frozenset(config.markers),
            selection=Selection.of(select=config.select, ignore=config.ignore),
        )


def _spots(value: Any) -> tuple[int | str, ...]:
    """Argument positions (ints) and keywords (strings) of a catalog entry."""
    if not isinstance(value, list):
        raise TypeError(f"expected a list of positions and keywords, got {value!r}")
    return tuple(a if isinstance(a, int) else str(a) for a in value)


def _tls_spots(value: Any) -> TlsSpots:
    if not isinstance(value, dict) or "ssl" not in value:
        raise TypeError(f"expected {{ ssl = [...], url = [...] }}, got {value!r}")
    return _spots(value["ssl"]), _spots(value.get("url", []))


def _parse(data: dict[str, Any], source: str) -> Catalog:
    try:
        calls = {str(k): str(v) for k, v in data["calls"].items()}
        objects: dict[str, ObjectRule] = {}
        factories: dict[str, str] = {}
        aliases: dict[str, str] = {}
        for type_name, spec in data.get("objects", {}).items():
            methods = spec["methods"]
            objects[type_name] = ObjectRule(
                type_name,
                str(spec["code"]),
                None if methods == "*" else frozenset(methods),
                frozenset(spec.get("except", ())),
                str(spec.get("why", "")),
            )
            factories.update(dict.fromkeys(spec.get("factories", ()), type_name))
            aliases.update(dict.fromkeys(spec.get("annotations", ()), type_name))
        for type_name, makers in data.get("offload-types", {}).items():
            factories.update(dict.fromkeys(makers, type_name))
        offload = {str(k): int(v) for k, v in data.get("offload", {}).items()}
        offload_methods = {str(k): int(v) for k, v in data.get("offload-methods", {}).items()}
        disarming: dict[str, frozenset[str]] = {}
        for name, flags in data.get("disarming-flags", {}).items():
            if not isinstance(flags, list):
                raise TypeError(f"disarming-flags.{name}: expected a list of flag names")
            disarming[str(name)] = frozenset(map(str, flags))
        disarming_keywords = {str(k): frozenset(_spots(v))
                              for k, v in data.get("disarming-keywords", {}).items()}
        loop_callbacks = {str(k): int(v) for k, v in data.get("loop-callbacks", {}).items()}
        protocols = data.get("loop-protocols", {})
        protocol_types = frozenset(map(str, protocols.get("types", ())))
        protocol_methods = frozenset(map(str, protocols.get("methods", ())))
        awaited_blocking = frozenset(map(str, data.get("awaited-blocking", {}).get("calls", ())))
        tls = data.get("default-tls", {})
        default_tls = {str(k): _tls_spots(v) for k, v in tls.get("calls", {}).items()}
        default_tls_methods = {str(k): _tls_spots(v) for k, v in tls.get("methods", {}).items()}
        after = {str(k): frozenset(map(str, v)) for k, v in data.get("done-after", {}).items()}
        checked = {str(k): frozenset(map(str, v))
                   for k, v in data.get("checked-first", {}).items()}
        memory = data.get("in-memory", {})
        in_memory_types = frozenset(map(str, memory.get("types", ())))
        in_memory_names = frozenset(map(str, memory.get("names", ())))
        in_memory_streams = frozenset(map(str, memory.get("streams", ())))
        in_memory_args: dict[str, tuple[int | str, ...]] = {
            str(k): tuple(a if isinstance(a, int) else str(a) for a in v)
            for k, v in memory.get("arguments", {}).items()}
        data_urls: dict[str, tuple[int | str, ...]] = {
            str(k): _spots(v) for k, v in memory.get("data-urls", {}).items()}
        zero_timeout = {str(k): _spots(v) for k, v in data.get("zero-timeout", {}).items()}
        no_target = {str(k): _spots(v) for k, v in data.get("no-target", {}).items()}
        fds = data.get("descriptors", {})
        fd_args = {str(k): None if v == "*" else _spots(v)
                   for k, v in fds.get("arguments", {}).items()}
        fd_sets = [frozenset(map(str, fds.get(k, ()))) for k in
                   ("factories", "pipes", "pipe-writes")]
        distinctive = {m: f"{t}.{m}" for t, spec in data.get("objects", {}).items()
                       if spec.get("distinctive") and isinstance(spec["methods"], list)
                       for m in spec["methods"]}
        attributes = {f"{t}.{a}": t for t, spec in data.get("objects", {}).items()
                      for a in spec.get("attributes", ())}
        elements = {f"{t}.{m}": t for t, spec in data.get("objects", {}).items()
                    for m in spec.get("iterates", ())}
        generators = frozenset(f"{t}.{m}" for t, spec in data.get("objects", {}).items()
                               for m in spec.get("generators", ()))
        modes = {str(k): frozenset(map(str, v))
                 for k, v in data.get("nonblocking-modes", {}).items()}
        lazy = {f for t, spec in data.get("objects", {}).items() if spec.get("lazy")
                for f in spec.get("factories", ())} & set(calls)
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"malformed catalog: {exc!r}", source=source) from None
    if awaited_blocking - set(calls):
        raise ConfigError(f"awaited-blocking calls not in [calls]: "
                          f"{sorted(awaited_blocking - set(calls))}", source=source)
    if lazy:
        raise ConfigError(f"lazy constructors listed as blocking calls: {sorted(lazy)}",
                          source=source)
    unknown = sorted({c for c in calls.values() if c not in RULES}
                     | {o.code for o in objects.values() if o.code not in RULES})
    if unknown:
        raise ConfigError(f"codes no rule family registers: {unknown}", source=source)
    generated = data.get("generated-stubs")
    stubs = (str(generated["code"]), tuple(map(str, generated["modules"])),
             tuple(map(str, generated["classes"]))) if generated else None
    if stubs is not None and stubs[0] not in RULES:
        raise ConfigError(f"codes no rule family registers: {[stubs[0]]}", source=source)
    per_process = frozenset(map(str, data.get("first-use", {}).get("per-process", ())))
    first_use = per_process | frozenset(map(str, data.get("first-use", {}).get("calls", ())))
    return Catalog(calls, objects, factories, offload, offload_methods, disarming, aliases,
                   after, in_memory_args, in_memory_types, first_use=first_use,
                   per_process=per_process, no_target=no_target, checked=checked,
                   zero_timeout=zero_timeout, fd_args=fd_args, fd_factories=fd_sets[0],
                   pipes=fd_sets[1], pipe_writes=fd_sets[2],
                   data_urls=data_urls, in_memory_names=in_memory_names,
                   in_memory_streams=in_memory_streams,
                   distinctive=distinctive,
                   disarming_keywords=disarming_keywords, loop_callbacks=loop_callbacks,
                   protocol_types=protocol_types, protocol_methods=protocol_methods,
                   awaited_blocking=awaited_blocking, default_tls=default_tls,
                   default_tls_methods=default_tls_methods, attributes=attributes,
                   elements=elements, generators=generators, modes=modes, stubs=stubs)


def load_catalog(config: LintConfig | None = None) -> Catalog:
    """The shipped catalog, extended by ``config`` when given."""
    res = resources.files(__package__).joinpath(CATALOG_FILE)
    try:
        data = tomllib.loads(res.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read catalog: {exc}", source=CATALOG_FILE) from None
    catalog = _parse(data, CATALOG_FILE)
    return catalog.with_config(config) if config is not None else catalog
