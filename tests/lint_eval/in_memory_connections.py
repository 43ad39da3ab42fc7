"""An object a factory builds over an in-memory store has no file behind it: the methods
of ``sqlite3.connect(":memory:")``'s connection and cursor do no file I/O, in the coroutine
or through a helper. Twin: the same calls on a connection to a file."""
import sqlite3


class Registry:
    def __init__(self) -> None:
        self.conn = sqlite3.connect(":memory:")

    def add(self, name: str) -> None:
        self.conn.execute("insert into names values (?)", (name,))
        self.conn.commit()

    async def register(self, name: str) -> None:
        self.add(name)


async def count(path: str) -> int:
    memory = sqlite3.connect(":memory:")
    cursor = memory.cursor()
    cursor.execute("select 1")
    disk = sqlite3.connect(path)  # error: COB105
    disk.execute("select count(*) from t")  # error: COB105
    return cursor.fetchone()[0]
