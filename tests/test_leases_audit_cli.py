"""`corevo-obs leases audit` on real stores: a holder whose process exited is an orphan."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import free_port

GHOST = (
    "import sys; from corevo_obs.leases import SqliteLeaseStore, RedisLeaseStore;"
    "cls = RedisLeaseStore if sys.argv[1].startswith('redis') else SqliteLeaseStore;"
    "s = cls('q', sys.argv[1], limit=3, timeout=30, worker='w1'); s.declare_fresh();"
    "print(s.acquire().holder)"
)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "corevo_obs.cli.main", "leases", "audit", *args],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_audit_reports_the_ghost_and_fails_on_orphans(kind, tmp_path, request):
    where = request.getfixturevalue("redis_url") if kind == "redis" else str(tmp_path / "l.db")
    ghost = subprocess.run([sys.executable, "-c", GHOST, where], capture_output=True, text=True,
                           check=True).stdout.strip()
    flag = "--redis" if kind == "redis" else "--sqlite"
    done = cli("q", flag, where, "--limit", "3", "--json", "--fail-on-orphans")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["orphaned"] == [ghost] and report["held"] == 1 and report["limit"] == 3
    text = cli("q", flag, where)
    assert text.returncode == 0 and f"orphaned {ghost}" in text.stdout
    assert "1 held" in text.stdout


def test_audit_of_an_unreachable_store_is_one_clear_line():
    done = cli("q", "--redis", f"redis://127.0.0.1:{free_port()}/0")
    assert done.returncode == 2
    assert done.stderr.startswith("corevo-obs: error: corevo-obs leases audit: cannot read")
    assert "Traceback" not in done.stderr


def test_audit_of_a_missing_or_foreign_sqlite_file_is_one_line_and_creates_nothing(tmp_path):
    missing = tmp_path / "no" / "leases.db"
    absent = tmp_path / "leases.db"
    foreign = tmp_path / "notes.txt"
    foreign.write_text("not a database\n")
    for path, words in ((missing, "no such SQLite file"), (absent, "no such SQLite file"),
                        (foreign, "cannot read the lease store")):
        done = cli("q", "--sqlite", str(path))
        assert done.returncode == 2, done
        assert done.stderr.startswith("corevo-obs: error: corevo-obs leases audit:")
        assert words in done.stderr and "Traceback" not in done.stderr
    assert not absent.exists() and not missing.parent.exists()
    assert foreign.read_text() == "not a database\n"


@pytest.mark.parametrize("args, words", [
    (["--limit", "0"], "--limit must be an integer >= 1, got '0'"),
    (["--limit", "-3"], "--limit must be an integer >= 1"),
    (["--limit", "x"], "--limit must be an integer >= 1"),
    (["--timeout", "nan"], "--timeout must be a finite number of seconds > 0, got 'nan'"),
    (["--timeout", "inf"], "--timeout must be a finite number"),
    (["--timeout", "0"], "--timeout must be a finite number"),
    (["--timeout", "soon"], "--timeout must be a finite number"),
])
def test_bad_numbers_are_one_line_and_exit_2(tmp_path, args, words):
    db = tmp_path / "l.db"
    subprocess.run([sys.executable, "-c", GHOST, str(db)], check=True, capture_output=True)
    done = cli("q", "--sqlite", str(db), *args)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and words in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_audit_opens_sqlite_read_only_and_changes_nothing(tmp_path):
    """A rollback-journal file stays one: no table is created, the journal mode is kept,
    and the file's bytes are the same afterwards."""
    import sqlite3

    db = tmp_path / "app.db"
    setup = sqlite3.connect(db, isolation_level=None)
    setup.execute("CREATE TABLE corevo_leases (quota TEXT, holder TEXT, heartbeat REAL,"
                  " PRIMARY KEY (quota, holder)) WITHOUT ROWID")
    setup.execute("INSERT INTO corevo_leases VALUES ('q', 'someone-else', 1.0)")
    setup.close()
    before = db.read_bytes()
    done = cli("q", "--sqlite", str(db), "--json", "--timeout", "0.5")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["held"] == 1 and report["expired"] == ["someone-else"]
    assert db.read_bytes() == before
    check = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    assert check.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    tables = {r[0] for r in check.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables == {"corevo_leases"}                  # no token table was created
    check.close()
    read_only = tmp_path / "ro"
    read_only.mkdir()
    (read_only / "l.db").write_bytes(before)
    (read_only / "l.db").chmod(0o444)
    done = cli("q", "--sqlite", str(read_only / "l.db"))
    assert done.returncode == 0 and "1 held" in done.stdout, done.stderr
