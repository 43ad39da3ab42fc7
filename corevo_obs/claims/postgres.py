"""PostgreSQL backend for the job store (psycopg 3 and psycopg_pool, imported only when used).

Autocommit, READ COMMITTED: a second concurrent claim blocks on the row lock, then
re-checks ``owner IS NULL`` against the committed row and updates nothing.

Surviving the server. Given a DSN, the store keeps a ``psycopg_pool.ConnectionPool``:
the pool reconnects in the background with its own backoff, so a restarted server is
used again without restarting the process. Every call is bounded:

- ``pool_timeout``: waiting for a usable connection (none exist while the server is down);
- ``connect_timeout``: one connection attempt (libpq counts whole seconds, at least 2);
- ``statement_timeout``: set on the server for each connection, plus a client-side
  deadline ``statement_timeout + DEADLINE_GRACE`` that shuts the socket down. The second
  one is what ends a wait on a server that is SIGSTOPped or cut off by the network:
  such a server cannot fire its own timeout, and its kernel still acknowledges packets.

A connection the server closed while it sat idle (a restart) is found without a round
trip: an idle autocommit connection has nothing to read, so a readable socket means EOF.
It is discarded and the next one taken, within the same ``pool_timeout``.

Any failure to reach the server is a ``BackendUnavailable`` (counted by ``JobStore``).
A caller's own connection or pool is accepted too; a single connection cannot be
replaced, so only a DSN or a pool survives a restart.

On an event loop, ``AsyncPostgresJobStore`` takes the same options over psycopg's
``AsyncConnectionPool`` (opened at the first call) or an ``AsyncConnection``: the same
stale check, the same failure translation (``_unreachable``), and the client deadline as
a loop timer that shuts the socket down (``_Cut``) — cancelling the task instead would
let psycopg wait on a server-side cancel that a frozen server never answers.

Example::

    jobs = PostgresJobStore(dsn, statement_timeout=2.0, pool_timeout=1.0)
    try:
        won = jobs.claim(job_id)
    except BackendUnavailable:
        ...                              # within pool_timeout + 2.0 + grace, never a hang
"""

from __future__ import annotations

import asyncio
import math
import os
import select
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from prometheus_client import CollectorRegistry

from ..core.errors import BackendUnavailable, ConfigError
from ..observer import Observer
from . import sql
from .store import AsyncDatabase, AsyncJobStore, Database, JobStore, Rows

# With this module (imported with the store class, before a loop runs), not in a store's
# constructor: called on the loop, that import (0.2-1.2 s) was counted as the host's stall.
with suppress(ImportError):  # the postgres extra: its absence is raised on use
    import psycopg
    import psycopg.conninfo
    from psycopg_pool import AsyncConnectionPool, ConnectionPool

BACKEND: Final = "postgresql"
SOURCE: Final = "PostgresJobStore"
CONNECT_TIMEOUT: Final = 5
STATEMENT_TIMEOUT: Final = 5.0
POOL_TIMEOUT: Final = 5.0
#: how long the pool retries one connection with backoff before it gives up on it; the
#: next request starts a fresh attempt, so this also caps the backoff after an outage
RECONNECT_TIMEOUT: Final = 5.0
POOL_SIZE: Final = 4
#: the client deadline's margin over the server's statement_timeout (which should win)
DEADLINE_GRACE: Final = 0.5
#: SQLSTATE classes that mean the connection itself is gone (connection exception; the
#: server shutting down or crashing): reach failures, like an error without a SQLSTATE
_LOST: Final = ("08", "57P")


@dataclass(frozen=True)
class PostgresOptions:
    """The bounds of one store; every value is checked here, naming the option."""

    connect_timeout: int = CONNECT_TIMEOUT
    statement_timeout: float = STATEMENT_TIMEOUT
    pool_timeout: float = POOL_TIMEOUT
    reconnect_timeout: float = RECONNECT_TIMEOUT
    pool_size: int = POOL_SIZE

    def __post_init__(self) -> None:
        for name in ("statement_timeout", "pool_timeout", "reconnect_timeout"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
                raise ConfigError(f"{name} must be a finite number of seconds > 0, "
                                  f"not {value!r}", source=SOURCE)
        if not isinstance(self.connect_timeout, int) or self.connect_timeout < 2:
            raise ConfigError("connect_timeout must be whole seconds >= 2 (libpq's minimum), "
                              f"not {self.connect_timeout!r}", source=SOURCE)
        if not isinstance(self.pool_size, int) or self.pool_size < 1:
            raise ConfigError(f"pool_size must be >= 1, not {self.pool_size!r}", source=SOURCE)

    @property
    def deadline(self) -> float:
        """Client-side limit of one statement."""
        return self.statement_timeout + DEADLINE_GRACE

    @property
    def bound(self) -> float:
        """The longest one call can take before it raises ``BackendUnavailable``."""
        return self.pool_timeout + self.deadline


class _Deadlines:
    """One thread that shuts down the socket of a statement past its deadline.

    Each armed statement owns a duplicate of its socket's fd, so a deadline can never hit
    another connection that reused the number after libpq closed its own fd. Every
    deadline is ``seconds`` after its arming, so none is ever earlier than one already
    armed, and an idle thread that wakes every ``seconds`` is never late: arming needs no
    notify (no thread switch per statement).
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._cond = threading.Condition()
        self._armed: dict[int, tuple[float, int]] = {}
        self._next = 0
        self._thread: threading.Thread | None = None
        self._closed = False

    def arm(self, fd: int) -> int:
        dup = os.dup(fd)
        with self._cond:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._watch, daemon=True,
                                                name="corevo-pg-deadlines")
                self._thread.start()
            key = self._next
            self._next += 1
            self._armed[key] = (time.monotonic() + self.seconds, dup)
            return key

    def disarm(self, key: int) -> bool:
        """Stop watching; True when the deadline had already fired."""
        with self._cond:
            entry = self._armed.pop(key, None)
        if entry is None:
            return True
        os.close(entry[1])
        return False

    def _watch(self) -> None:
        with self._cond:
            while not self._closed:
                now = time.monotonic()
                due = [k for k, (at, _) in self._armed.items() if at <= now]
                for key in due:
                    _, dup = self._armed.pop(key)
                    _shutdown(dup)
                nearest = min((at for at, _ in self._armed.values()),
                              default=now + self.seconds)
                self._cond.wait(max(0.0, nearest - now))

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
            for _, dup in self._armed.values():
                os.close(dup)
            self._armed.clear()


def _shutdown(fd: int) -> None:
    """Both directions down: the blocked read sees EOF, libpq reports the connection lost."""
    sock = socket.socket(fileno=fd)
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        sock.detach()
        os.close(fd)


def _stale(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """Did the server close this idle connection? (a readable idle socket means EOF)."""
    if conn.closed or conn.broken:
        return True
    poller = select.poll()
    poller.register(conn.pgconn.socket, select.POLLIN)
    return bool(poller.poll(0))


def _server_options(conninfo: str, opts: PostgresOptions) -> str:
    """The DSN with the statement timeout added to its own ``options`` (kept, not replaced)."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    given = str(conninfo_to_dict(conninfo).get("options") or "")
    timeout = f"-c statement_timeout={int(opts.statement_timeout * 1000)}"
    return make_conninfo(conninfo, options=f"{given} {timeout}".strip(),
                         connect_timeout=opts.connect_timeout)


def _check_autocommit(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> None:
    # Each statement must commit on its own: an open transaction would keep the
    # claimed row locked across the caller's remote work.
    if not conn.autocommit:
        raise ConfigError("the psycopg connection must be in autocommit mode", source=SOURCE)


def _busy(started: float, wait: float) -> BackendUnavailable:
    return BackendUnavailable("the connection stayed busy", backend=BACKEND,
                              waited=time.monotonic() - started, bound=wait)


C = TypeVar("C", "psycopg.Connection[Any]", "psycopg.AsyncConnection[Any]")


def _usable(conn: C, started: float) -> C:
    """The caller's single connection, unless it is closed (it cannot be replaced)."""
    if conn.closed or conn.broken:
        raise BackendUnavailable(
            "the caller's connection is closed (pass a DSN or a pool to reconnect)",
            backend=BACKEND, waited=time.monotonic() - started)
    return conn


class _Converted:
    """``:name`` statements rewritten for psycopg once each (both shells share it)."""

    def __init__(self) -> None:
        self._sql: dict[str, str] = {}

    def _convert(self, statement: str) -> str:
        converted = self._sql.get(statement)
        if converted is None:
            converted = self._sql[statement] = sql.to_pyformat(statement)
        return converted


def _unreachable(exc: Exception, started: float, opts: PostgresOptions,
                 fired: bool) -> BackendUnavailable | None:
    """The ``BackendUnavailable`` a psycopg error means, or None (an error of the
    statement itself, raised as it is). ``fired``: the client deadline cut the socket.
    """
    import psycopg

    waited = time.monotonic() - started
    if isinstance(exc, psycopg.errors.QueryCanceled):  # the server's statement_timeout
        return BackendUnavailable(str(exc).strip(), backend=BACKEND, waited=waited,
                                  bound=opts.statement_timeout)
    if not isinstance(exc, psycopg.OperationalError):
        return None
    if exc.sqlstate and not exc.sqlstate.startswith(_LOST):
        return None   # the server answered: an error of the statement, not of reach
    return BackendUnavailable(
        f"no reply within {opts.deadline:.2f}s" if fired
        else str(exc).strip() or type(exc).__name__,
        backend=BACKEND, waited=waited, bound=opts.deadline if fired else None,
        maybe_committed=True)


class PostgresDatabase(_Converted, Database):
    """Statements on a pool (own or the caller's) or on the caller's single connection."""

    def __init__(self, conninfo: Any, *, options: PostgresOptions | None = None) -> None:
        import psycopg
        from psycopg_pool import ConnectionPool

        self.options = opts = options or PostgresOptions()
        self._pool: ConnectionPool[Any] | None = None
        self._conn: psycopg.Connection[Any] | None = None
        self._owned = isinstance(conninfo, str)
        if isinstance(conninfo, str):
            self._pool = ConnectionPool(
                _server_options(conninfo, opts), kwargs={"autocommit": True},
                min_size=1, max_size=opts.pool_size, timeout=opts.pool_timeout,
                reconnect_timeout=opts.reconnect_timeout, name="corevo-jobs", open=False)
            self._pool.open(wait=False)
        elif isinstance(conninfo, ConnectionPool):
            self._pool = conninfo
        elif isinstance(conninfo, psycopg.Connection):
            _check_autocommit(conninfo)
            self._conn = conninfo
        else:
            raise ConfigError("expected a DSN, a psycopg connection or a psycopg_pool "
                              f"ConnectionPool, not {type(conninfo).__name__}", source=SOURCE)
        self._lock = threading.Lock()   # serializes the single caller connection only
        self._deadlines = _Deadlines(opts.deadline)
        _Converted.__init__(self)

    @contextmanager
    def _connection(self, started: float) -> Iterator[psycopg.Connection[Any]]:
        """A live connection within ``pool_timeout``, or ``BackendUnavailable``."""
        from psycopg_pool import PoolTimeout

        wait = self.options.pool_timeout
        if self._pool is None:
            assert self._conn is not None
            if not self._lock.acquire(timeout=wait):
                raise _busy(started, wait)
            try:
                yield _usable(self._conn, started)
            finally:
                self._lock.release()
            return
        pool = self._pool
        while True:
            try:
                conn = pool.getconn(timeout=max(0.0, started + wait - time.monotonic()))
            except PoolTimeout as exc:
                raise BackendUnavailable(f"no connection: {exc}", backend=BACKEND,
                                         waited=time.monotonic() - started,
                                         bound=wait) from exc
            if not _stale(conn):
                break
            conn.close()        # the pool discards it and opens a fresh one
            pool.putconn(conn)
        try:
            _check_autocommit(conn)
            yield conn
        finally:
            pool.putconn(conn)

    def run(self, statement: str, params: Mapping[str, Any]) -> tuple[Rows, int]:
        converted = self._convert(statement)
        started = time.monotonic()
        with self._connection(started) as conn:
            key = -1
            try:
                key = self._deadlines.arm(conn.pgconn.socket)
                cur = conn.execute(converted, params)
                rows = cur.fetchall() if cur.description is not None else []
                return rows, cur.rowcount
            except Exception as exc:
                fired = key >= 0 and self._deadlines.disarm(key)
                key = -1
                translated = _unreachable(exc, started, self.options, fired)
                if translated is None:
                    raise
                raise translated from exc
            finally:
                if key >= 0:
                    self._deadlines.disarm(key)

    def close(self) -> None:
        self._deadlines.close()
        if self._owned and self._pool is not None:
            self._pool.close()
        elif self._conn is not None:
            self._conn.close()


class PostgresJobStore(JobStore):
    """A ``JobStore`` on PostgreSQL: a DSN (pooled, reconnecting), a ``ConnectionPool`` or
    an open autocommit psycopg connection. The bounds (``connect_timeout``,
    ``statement_timeout``, ``pool_timeout``, ``reconnect_timeout``, ``pool_size``: the
    fields of ``PostgresOptions``) are described in the module doc; other options are
    those of ``JobStore``.
    """

    def __init__(self, dsn: Any, *, connect_timeout: int = CONNECT_TIMEOUT,
                 statement_timeout: float = STATEMENT_TIMEOUT,
                 pool_timeout: float = POOL_TIMEOUT,
                 reconnect_timeout: float = RECONNECT_TIMEOUT, pool_size: int = POOL_SIZE,
                 table: str = "corevo_jobs",
                 owner: str | None = None, observer: Observer | None = None,
                 worker: str | None = None, registry: CollectorRegistry | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        bounds = PostgresOptions(connect_timeout=connect_timeout,
                                 statement_timeout=statement_timeout, pool_timeout=pool_timeout,
                                 reconnect_timeout=reconnect_timeout, pool_size=pool_size)
        db = PostgresDatabase(dsn, options=bounds)
        try:
            super().__init__(db, table=table, owner=owner, observer=observer, worker=worker,
                             registry=registry, clock=clock)
        except BaseException:
            db.close()
            raise


class _Cut:
    """The async client deadline: a loop timer that shuts the statement's socket down.

    Like ``_Deadlines`` it acts on a duplicate of the fd, so it cannot hit a connection
    that reused the number. Cancelling the task instead would make psycopg try a
    server-side cancel and wait for it (up to 10 s more) on a server that may be frozen.
    """

    def __init__(self, fd: int, seconds: float) -> None:
        self.fired = False
        self._dup = os.dup(fd)
        self._timer = asyncio.get_running_loop().call_later(seconds, self._fire)

    def _fire(self) -> None:
        self.fired = True
        dup, self._dup = self._dup, -1
        _shutdown(dup)

    def disarm(self) -> bool:
        """Stop the timer; True when the deadline had already fired."""
        self._timer.cancel()
        if self._dup >= 0:
            os.close(self._dup)
            self._dup = -1
        return self.fired


class AsyncPostgresDatabase(_Converted, AsyncDatabase):
    """``PostgresDatabase`` for an event loop: psycopg's ``AsyncConnectionPool`` (own or the
    caller's) or the caller's single ``AsyncConnection``, with the same bounds and the
    same failure translation; nothing blocks the loop.
    """

    def __init__(self, conninfo: Any, *, options: PostgresOptions | None = None) -> None:
        import psycopg
        from psycopg_pool import AsyncConnectionPool

        self.options = opts = options or PostgresOptions()
        self._pool: AsyncConnectionPool[Any] | None = None
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._owned = isinstance(conninfo, str)
        self._opened = not self._owned   # an owned pool opens at the first call, on the loop
        if isinstance(conninfo, str):
            self._pool = AsyncConnectionPool(
                _server_options(conninfo, opts), kwargs={"autocommit": True},
                min_size=1, max_size=opts.pool_size, timeout=opts.pool_timeout,
                reconnect_timeout=opts.reconnect_timeout, name="corevo-jobs-async",
                open=False)
        elif isinstance(conninfo, AsyncConnectionPool):
            self._pool = conninfo
        elif isinstance(conninfo, psycopg.AsyncConnection):
            _check_autocommit(conninfo)
            self._conn = conninfo
        else:
            raise ConfigError("expected a DSN, a psycopg AsyncConnection or a psycopg_pool "
                              f"AsyncConnectionPool, not {type(conninfo).__name__}",
                              source=SOURCE)
        self._lock: asyncio.Lock | None = None   # serializes the single caller connection
        _Converted.__init__(self)

    @asynccontextmanager
    async def _connection(self, started: float) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A live connection within ``pool_timeout``, or ``BackendUnavailable``."""
        from psycopg_pool import PoolTimeout

        wait = self.options.pool_timeout
        if self._pool is None:
            assert self._conn is not None
            if self._lock is None:
                self._lock = asyncio.Lock()
            try:
                async with asyncio.timeout(wait):
                    await self._lock.acquire()
            except TimeoutError:
                raise _busy(started, wait) from None
            try:
                yield _usable(self._conn, started)
            finally:
                self._lock.release()
            return
        pool = self._pool
        if not self._opened:
            self._opened = True
            await pool.open(wait=False)
        while True:
            try:
                conn = await pool.getconn(
                    timeout=max(0.0, started + wait - time.monotonic()))
            except PoolTimeout as exc:
                raise BackendUnavailable(f"no connection: {exc}", backend=BACKEND,
                                         waited=time.monotonic() - started,
                                         bound=wait) from exc
            if not _stale(conn):
                break
            await conn.close()      # the pool discards it and opens a fresh one
            await pool.putconn(conn)
        try:
            _check_autocommit(conn)
            yield conn
        finally:
            await pool.putconn(conn)

    async def run(self, statement: str, params: Mapping[str, Any]) -> tuple[Rows, int]:
        converted = self._convert(statement)
        started = time.monotonic()
        async with self._connection(started) as conn:
            cut = _Cut(conn.pgconn.socket, self.options.deadline)
            try:
                cur = await conn.execute(converted, params)
                rows = await cur.fetchall() if cur.description is not None else []
                return rows, cur.rowcount
            except Exception as exc:
                translated = _unreachable(exc, started, self.options, cut.disarm())
                if translated is None:
                    raise
                raise translated from exc
            finally:
                cut.disarm()

    async def aclose(self) -> None:
        if self._owned and self._pool is not None:
            if self._opened:
                await self._pool.close()
        elif self._conn is not None:
            await self._conn.close()


class AsyncPostgresJobStore(AsyncJobStore):
    """``PostgresJobStore`` for an event loop (psycopg's async pool): a DSN (pooled,
    reconnecting), an ``AsyncConnectionPool`` or an open autocommit ``AsyncConnection``.
    Same timeouts and options as ``PostgresJobStore``.
    """

    def __init__(self, dsn: Any, *, connect_timeout: int = CONNECT_TIMEOUT,
                 statement_timeout: float = STATEMENT_TIMEOUT,
                 pool_timeout: float = POOL_TIMEOUT,
                 reconnect_timeout: float = RECONNECT_TIMEOUT, pool_size: int = POOL_SIZE,
                 table: str = "corevo_jobs",
                 owner: str | None = None, observer: Observer | None = None,
                 worker: str | None = None, registry: CollectorRegistry | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        bounds = PostgresOptions(connect_timeout=connect_timeout,
                                 statement_timeout=statement_timeout, pool_timeout=pool_timeout,
                                 reconnect_timeout=reconnect_timeout, pool_size=pool_size)
        super().__init__(AsyncPostgresDatabase(dsn, options=bounds), table=table, owner=owner,
                         observer=observer, worker=worker, registry=registry, clock=clock)
