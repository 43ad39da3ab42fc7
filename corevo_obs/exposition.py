"""Expose metrics: single-process or prometheus_client multiprocess mode, served off the loop.

The endpoint runs in its own thread (never on the event loop it watches), so while a loop
is frozen by blocking I/O a scrape still answers and the heartbeat's age is visible.
It binds 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import logging
import os
import tempfile
import threading
import weakref
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any, Final, Literal
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import REGISTRY, CollectorRegistry

from .core import promclient
from .core.errors import ConfigError, MetricsDirError, MetricsPortBusy
from .core.guard import absorb
from .core.identity import WORKER_ENV
from .core.lifecycle import Service, starts, stops

log = logging.getLogger("corevo_obs.exposition")

MULTIPROC_ENV: Final = "PROMETHEUS_MULTIPROC_DIR"
DEFAULT_HOST: Final = "127.0.0.1"
#: named by a taken port's error: the gunicorn hooks' variable first (the usual clash is
#: two apps on one host with the default 9430)
PORT_SETTING: Final = "$COREVO_METRICS_PORT (gunicorn hooks) or MetricsServer(port=...)"
PROBE_BYTES: Final = 1 << 16  # prometheus_client's initial size of one metric file
#: seconds a connection of the endpoint may wait for a request (or for a send) before it
#: is closed: an idle or stalled client must not keep a thread for good
IDLE_TIMEOUT: Final = 5.0
#: connections the endpoint serves at once, one thread each; more are closed at once
MAX_CONNECTIONS: Final = 128
_exit_hook_pid: int | None = None


def multiprocess_dir() -> Path | None:
    """The active multiprocess directory, or None in single-process mode."""
    raw = os.environ.get(MULTIPROC_ENV) or os.environ.get("prometheus_multiproc_dir")
    return Path(raw) if raw else None


def check_metrics_dir(path: str | os.PathLike[str]) -> Path:
    """Fail at startup, with a clear message, if ``path`` cannot hold metric files."""
    p = Path(path)
    if not p.exists():
        raise MetricsDirError(f"{p} does not exist; create it before starting workers", path=str(p))
    if not p.is_dir():
        raise MetricsDirError(f"{p} is not a directory", path=str(p))
    try:
        with tempfile.NamedTemporaryFile(dir=p, prefix=".corevo-probe-") as probe:
            # the room one metric file takes: a writer without it would hold its values
            # in memory from its first metric (promclient.ReservedMmapedDict); say so now
            try:
                os.posix_fallocate(probe.fileno(), 0, PROBE_BYTES)
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL):
                    raise
                os.write(probe.fileno(), bytes(PROBE_BYTES))  # no fallocate here (e.g. NFS)
    except OSError as exc:
        what = "has no room for metric files" if exc.errno == errno.ENOSPC else \
            "is not writable by this process"
        raise MetricsDirError(f"{p} {what} ({exc.strerror})", path=str(p)) from None
    return p


def enable_multiprocess(path: str | os.PathLike[str] | None = None, *,
                        compact_at_exit: int | None = None) -> Path:
    """Put this process in multiprocess mode, writing to ``path`` or the env directory.

    Call it at worker start, before any metric is created. It validates the directory
    (raising ``MetricsDirError`` instead of failing later inside a task), and marks the
    process dead at exit so its live gauges disappear from the exposition.
    ``compact_at_exit``: dead writers that make this process compact as it exits (0 =
    never); default ``$COREVO_COMPACT_AT_EXIT``, else 16 (a bad value: ``ConfigError``).
    """
    global _exit_hook_pid
    if compact_at_exit is not None and (type(compact_at_exit) is not int or compact_at_exit < 0):
        raise ConfigError(f"compact_at_exit={compact_at_exit!r}: a whole number >= 0",
                          source="enable_multiprocess")
    if path is None:
        found = multiprocess_dir()
        if found is None:
            raise ConfigError(f"no directory given and ${MULTIPROC_ENV} is not set")
        path = found
    p = check_metrics_dir(path)
    os.environ[MULTIPROC_ENV] = str(p)
    promclient.use_multiprocess_values()
    from .mpdir.hooks import install_writer  # start-time record, fork + exit compaction

    try:
        install_writer(p, compact_at_exit)
    except OSError as exc:  # full disk, read-only, a link planted under .corevo/
        where = exc.filename if exc.filename is not None else p
        raise MetricsDirError(
            f"cannot register this worker in {p}: {where}: {exc.strerror or exc}", path=str(p)
        ) from None
    if not os.environ.get(WORKER_ENV):
        # Compaction keeps dead writers' counters, each under its own worker label: with
        # pid labels every restart adds series for good.
        log.warning(
            "$%s is not set: metrics are labelled worker=\"pid%d\", and every restarted "
            "worker adds new series; set it to a slot name (w0..wN) to keep them bounded",
            WORKER_ENV, os.getpid(),
        )
    if _exit_hook_pid != os.getpid():
        atexit.register(mark_process_dead)
        _exit_hook_pid = os.getpid()
    return p


def mark_process_dead(pid: int | None = None) -> None:
    """Remove the live-gauge files of ``pid`` (default: this process).

    What ``prometheus_client.multiprocess.mark_process_dead`` does, at a directory fd
    (a symlink planted under such a name is unlinked, never followed), and never raising:
    it runs at exit, when the directory may have become read-only or gone.
    """
    mp = multiprocess_dir()
    if mp is None:
        return
    from .mpdir.layout import live_gauge_files

    try:
        fd = os.open(mp, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for name in live_gauge_files(os.listdir(fd), os.getpid() if pid is None else pid):
                try:
                    os.unlink(name, dir_fd=fd)
                except FileNotFoundError:
                    pass
        finally:
            os.close(fd)
    except OSError as exc:
        absorb("mpdir-exit", exc)


Scope = Literal["auto", "host", "process"]


def is_writer() -> bool:
    """True in a process that called ``enable_multiprocess`` (it writes metric files)."""
    return _exit_hook_pid == os.getpid()


#: ``1`` keeps the catalog's ``host_sum`` metrics per worker at a host endpoint
BY_WORKER_ENV: Final = "COREVO_METRICS_BY_WORKER"


def by_worker_setting() -> bool:
    """``$COREVO_METRICS_BY_WORKER`` (``1``/``true``/``yes`` or ``0``/``false``/``no``,
    default no); any other value is counted and logged once, and the default used."""
    raw = os.environ.get(BY_WORKER_ENV, "").strip().lower()
    if raw in ("", "0", "false", "no"):
        return False
    if raw in ("1", "true", "yes"):
        return True
    absorb("metrics-config", ConfigError(f"${BY_WORKER_ENV}={raw!r}: 1 or 0; using 0",
                                         source=f"${BY_WORKER_ENV}"))
    return False


def exposition_registry(scope: Scope = "host", *,
                        by_worker: bool | None = None) -> CollectorRegistry:
    """The registry to serve: in multiprocess mode the aggregate of the directory
    (``host``: every worker once) or this process's own files only (``process``);
    otherwise the default registry. ``auto`` is ``process`` in a writer, else ``host``.

    At ``host`` scope the catalog's ``host_sum`` metrics (the task-stage histograms,
    workers x kinds x buckets series) are summed across workers, without the ``worker``
    label, unless ``by_worker`` (default ``$COREVO_METRICS_BY_WORKER``, else no) keeps
    them apart; everything else keeps its ``worker`` label.
    """
    mp = multiprocess_dir()
    if mp is None:
        return REGISTRY
    from .mpdir.collector import install_collectors  # locked reads + directory health

    if scope == "auto":
        scope = "process" if is_writer() else "host"
    reg = CollectorRegistry()
    # a serving process that writes no files (``metrics serve``) counts what it absorbs
    # (janitor, unreadable files) in memory: serve that with the aggregate
    own = REGISTRY if scope == "host" and promclient.in_memory_values() else None
    if by_worker is None:
        by_worker = by_worker_setting()
    install_collectors(reg, mp, only_pid=os.getpid() if scope == "process" else None, own=own,
                       by_worker=by_worker or scope == "process")
    return reg


_servers: weakref.WeakSet[MetricsServer] = weakref.WeakSet()


def _forget_servers_in_child() -> None:
    """A forked child has the listening sockets but not the threads serving them: close
    the sockets (no shutdown: it would wait for a thread that does not exist here)."""
    for server in list(_servers):
        server._abandon()


os.register_at_fork(after_in_child=_forget_servers_in_child)


class _Handler(WSGIRequestHandler):
    """prometheus_client's silent handler, with a socket timeout (``IDLE_TIMEOUT``)."""

    timeout = IDLE_TIMEOUT

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        """Log nothing (a scrape per second would flood the log)."""


class _Endpoint(ThreadingMixIn, WSGIServer):
    """A thread per connection, at most ``MAX_CONNECTIONS`` of them: past that a new
    connection is closed at once (a scraper retries) instead of adding a thread."""

    daemon_threads = True
    request_queue_size = MAX_CONNECTIONS  # a burst of scrapers waits in the backlog

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def _listen(port: int, host: str, registry: CollectorRegistry,
            port_setting: str) -> tuple[Any, threading.Thread]:
    """Bind and serve ``registry`` on a daemon thread (``start_wsgi_server``'s shape, with
    bounded connections and cached line prefixes: ``fastexpo``); a bad host is a
    ``ConfigError``, a taken port ``MetricsPortBusy`` naming ``port_setting``."""
    import socket

    from .fastexpo import make_app  # the mpdir reader's rows: imported when serving

    where = f"cannot listen on {host}:{port}"
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, _, _, _, sockaddr = infos[0]

        class Endpoint(_Endpoint):
            address_family = family

        httpd = make_server(str(sockaddr[0]), port, make_app(registry), Endpoint,
                            handler_class=_Handler)
    except UnicodeError:  # idna: an empty or over-long label ("bogus..host")
        raise ConfigError(f"{where} (not a valid host name)", source="metrics endpoint") \
            from None
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise MetricsPortBusy(host, port, port_setting) from None
        raise ConfigError(f"{where} ({exc.strerror or exc})", source="metrics endpoint") \
            from None
    thread = threading.Thread(target=httpd.serve_forever, name="corevo-metrics-endpoint",
                              daemon=True)
    thread.start()
    return httpd, thread


class MetricsServer(Service):
    """A ``/metrics`` endpoint on its own daemon thread.

    In multiprocess mode ``scope`` says what it serves: ``host``, every worker of the
    directory once (the gunicorn master, ``corevo-obs metrics serve``: one scrape target
    per host); ``process``, only this process's own series (a server in each worker: one
    target per worker, and ``sum()`` still counts each worker once). ``auto`` (default)
    is ``process`` in a process that called ``enable_multiprocess``, ``host`` elsewhere.
    At ``host`` scope the task-stage histograms are summed across workers unless
    ``by_worker`` (default ``$COREVO_METRICS_BY_WORKER``; see ``exposition_registry``).
    A forked child does not inherit a running server (its socket is closed in the child).
    Each connection has a thread, at most ``MAX_CONNECTIONS`` at once, and is closed after
    ``IDLE_TIMEOUT`` s without a request: idle clients cannot pile up threads.
    A port in use raises ``MetricsPortBusy`` naming the port and ``port_setting`` (what
    the user changes): the start ends there rather than serve somewhere Prometheus does
    not scrape.

    Example::

        server = MetricsServer(port=0).start()
        server.url            # 'http://127.0.0.1:41234/metrics'
        server.close()        # stops the endpoint and its janitor
    """

    def __init__(
        self,
        *,
        port: int = 0,
        host: str = DEFAULT_HOST,
        registry: CollectorRegistry | None = None,
        compact_every: float | None = None,
        scope: Scope = "auto",
        port_setting: str = PORT_SETTING,
        by_worker: bool | None = None,
    ) -> None:
        if scope not in ("auto", "host", "process"):
            raise ConfigError(f"scope must be auto, host or process, got {scope!r}",
                              source="MetricsServer")
        if registry is not None and (scope != "auto" or by_worker is not None):
            raise ConfigError("registry= with scope= or by_worker= conflict: those choose the "
                              "registry to serve, so pass one or the other",
                              source="MetricsServer")
        self._scope: Scope = scope
        self._by_worker = by_worker  # host scope: keep stage histograms per worker
        self._port = port
        #: what a user changes to move the port, named when it is taken
        self._port_setting = port_setting
        self._compact_every = compact_every  # seconds between janitor passes (mpdir)
        self._janitor: Any = None
        self._host = host
        self._registry = registry
        self._httpd: object | None = None
        self._thread: threading.Thread | None = None

    @starts
    def start(self) -> None:
        """Listen (and start the janitor); returns the server. Started once: a second
        ``start()`` or a ``with`` after it keeps the one listener."""
        registry = self._registry if self._registry is not None else exposition_registry(
            self._scope, by_worker=self._by_worker)
        self._httpd, self._thread = _listen(self._port, self._host, registry,
                                            self._port_setting)
        _servers.add(self)
        mp = multiprocess_dir()
        if self._compact_every and mp is not None:
            from .mpdir.janitor import Janitor

            self._janitor = Janitor(mp, interval=self._compact_every).start()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return int(self._httpd.server_port)  # type: ignore[attr-defined]

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}/metrics"

    def _abandon(self) -> None:
        self._started = False
        httpd, self._httpd = self._httpd, None
        self._thread = self._janitor = None
        if httpd is not None:
            with contextlib.suppress(OSError):
                httpd.socket.close()  # type: ignore[attr-defined]


    @stops
    def close(self) -> None:
        """Stop serving and stop the janitor; safe to call twice."""
        if self._janitor is not None:
            self._janitor.close()
            self._janitor = None
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()  # type: ignore[attr-defined]
            httpd.server_close()  # type: ignore[attr-defined]
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
