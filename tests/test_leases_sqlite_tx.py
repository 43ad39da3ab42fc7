"""The SQLite lease store's write transaction never leaves its connection mid-transaction.

Real SQLite files and a real second process; the failures are SQLite's own: a write lock
held by another process past the busy timeout, and a COMMIT that fails (a deferred
foreign-key violation leaves the transaction open, as a lock or a full disk would).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys

from corevo_obs.leases import SqliteLeaseStore

HOLD_LOCK = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
db.execute("INSERT INTO corevo_leases VALUES ('q', 'intruder', 0)")
print("locked", flush=True)
sys.stdin.readline()          # hold the write lock until told
db.execute("ROLLBACK")
"""


def sample(registry, name, **labels):
    return registry.get_sample_value(name, {"worker": "w0", "quota": "q", **labels}) or 0.0


def test_a_writer_holding_the_lock_fails_the_call_closed_and_leaves_no_transaction(
        tmp_path, registry):
    path = tmp_path / "leases.db"
    store = SqliteLeaseStore("q", path, limit=2, timeout=30, worker="w0", registry=registry,
                             busy_timeout=0.2)
    held = store.acquire()
    assert held is not None
    writer = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(path)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "locked"
        assert store.acquire() is None              # BEGIN IMMEDIATE timed out: fail closed
        assert held.heartbeat() is False            # cannot prove it holds: closed
        assert not store._rows._db.in_transaction
        assert sample(registry, "corevo_lease_acquire_total", outcome="error") == 1
        assert sample(registry, "corevo_lease_heartbeat_total", outcome="error") == 1
    finally:
        assert writer.stdin is not None
        writer.stdin.write("go\n")
        writer.stdin.close()
        assert writer.wait(timeout=60) == 0
    again = store.acquire()                         # the same connection works again
    assert again is not None and held.heartbeat() is True
    assert sorted(h for h, _ in store.holders()) == sorted([held.holder, again.holder])
    store.close()


def test_a_failing_commit_is_rolled_back_and_the_connection_stays_usable(tmp_path, registry):
    path = tmp_path / "leases.db"
    store = SqliteLeaseStore("q", path, limit=2, timeout=30, worker="w0", registry=registry,
                             busy_timeout=0.2)
    # Every insert into the lease table also inserts an orphan row whose foreign key is
    # checked only at COMMIT: COMMIT fails and SQLite keeps the transaction open.
    setup = sqlite3.connect(path, isolation_level=None)
    setup.executescript("""
        CREATE TABLE parent (id TEXT PRIMARY KEY);
        CREATE TABLE child (p TEXT REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);
        CREATE TRIGGER orphan AFTER INSERT ON corevo_leases
        BEGIN INSERT INTO child VALUES ('missing'); END;
    """)
    store._rows._db.execute("PRAGMA foreign_keys = ON")
    assert store.acquire(holder="doomed") is None          # COMMIT raised: counted, fail closed
    assert sample(registry, "corevo_lease_acquire_total", outcome="error") == 1
    assert not store._rows._db.in_transaction
    # The write lock was given back: another process's connection can write at once.
    other = sqlite3.connect(path, isolation_level=None, timeout=0.2)
    other.execute("DROP TRIGGER orphan")
    other.close()
    setup.close()
    lease = store.acquire()
    assert lease is not None
    assert [h for h, _ in store.holders()] == [lease.holder]   # "doomed" was rolled back
    store.close()
