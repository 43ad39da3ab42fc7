"""A driver object built in its non-blocking mode (psycopg2's ``async_=True``: libpq on a
non-blocking socket): its ``cursor()`` only allocates and ``close()`` waits for nothing.
The same calls on a connection made in the default mode block. Connecting still resolves
the host: the constructors, built by their users' coroutines, are low-confidence chains."""

import psycopg2


class AsyncConnection:
    def __init__(self, dsn: str) -> None:  # error: COB110 [low]
        self._conn = psycopg2.connect(dsn, async_=True)

    async def cursor(self):
        return self._conn.cursor()

    async def close(self) -> None:
        self._close()

    def _close(self) -> None:
        self._conn.close()


class FlagConnection:
    def __init__(self, dsn: str) -> None:  # error: COB110 [low]
        self._conn = psycopg2.connect(dsn, async_=1)

    async def cursor(self):
        return self._conn.cursor()


class SyncConnection:
    def __init__(self, dsn: str) -> None:  # error: COB110 [low]
        self._conn = psycopg2.connect(dsn, async_=False)

    async def cursor(self):
        return self._conn.cursor()  # error: COB105 [high]

    async def close(self) -> None:
        self._close()  # error: COB110 [medium]

    def _close(self) -> None:
        self._conn.close()


class SpreadConnection:
    def __init__(self, dsn: str, **kwargs) -> None:  # error: COB110 [low]
        kwargs["async_"] = kwargs.pop("async", True)
        self._conn = psycopg2.connect(dsn, **kwargs)

    async def cursor(self):
        return self._conn.cursor()


class SpreadSyncConnection:
    def __init__(self, dsn: str, **kwargs) -> None:  # error: COB110 [low]
        kwargs["async_"] = False
        self._conn = psycopg2.connect(dsn, **kwargs)

    async def cursor(self):
        return self._conn.cursor()  # error: COB105 [high]
