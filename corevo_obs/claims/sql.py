"""The claim protocol's SQL, written once for SQLite and PostgreSQL.

Statements use ``:name`` parameters (SQLite's style); ``to_pyformat`` rewrites them for
psycopg. Both dialects support ``UPDATE ... RETURNING`` (SQLite >= 3.35), so a claim's
new epoch comes back from the same statement that took it. Every state change is one
conditional UPDATE: the WHERE clause *is* the protocol, and rowcount 0 is the answer
"not yours".
"""

from __future__ import annotations

import re
from typing import Final

_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_PARAM = re.compile(r"(?<![:\w]):([a-z_]+)")

SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS {t} (
    id TEXT PRIMARY KEY,
    state TEXT NOT NULL DEFAULT 'queued',
    owner TEXT,
    claimed_at DOUBLE PRECISION,
    epoch INTEGER NOT NULL DEFAULT 0,
    token TEXT,
    execution_id TEXT,
    execution_started_at DOUBLE PRECISION,
    created_at DOUBLE PRECISION NOT NULL,
    finished_at DOUBLE PRECISION,
    payload TEXT
)"""
INDEX: Final = "CREATE INDEX IF NOT EXISTS {t}_state ON {t} (state, created_at)"

COLUMNS: Final = ("id, state, owner, claimed_at, epoch, token, execution_id, "
                  "execution_started_at, created_at, finished_at, payload")

INSERT: Final = "INSERT INTO {t} (id, created_at, payload) VALUES (:job, :now, :payload)"

# The local fast path: the row is born claimed (epoch 1), so no idle worker can take it
# between an INSERT and a CLAIM.
INSERT_CLAIMED: Final = """
INSERT INTO {t} (id, created_at, payload, owner, claimed_at, epoch, token)
VALUES (:job, :now, :payload, :owner, :now, 1, :token)"""

# The claim (docs/leases-claims.md, Claims): only an ownerless, never-started queued
# job; epoch + 1, new token.
CLAIM: Final = """
UPDATE {t} SET owner = :owner, claimed_at = :now, epoch = epoch + 1, token = :token
WHERE id = :job AND state = 'queued' AND owner IS NULL AND claimed_at IS NULL
  AND execution_id IS NULL AND execution_started_at IS NULL
RETURNING epoch, created_at"""

# queued -> running only for the owner, epoch and token of the current claim.
START: Final = """
UPDATE {t} SET state = 'running', execution_id = :execution, execution_started_at = :now
WHERE id = :job AND state = 'queued' AND owner = :owner AND claimed_at IS NOT NULL
  AND epoch = :epoch AND token = :token
  AND execution_id IS NULL AND execution_started_at IS NULL"""

# A terminal state written by the executor carries its full execution identity.
FINISH: Final = """
UPDATE {t} SET state = :state, finished_at = :now
WHERE id = :job AND state = 'running' AND owner = :owner AND epoch = :epoch
  AND token = :token AND execution_id = :execution"""

CANCEL_QUEUED: Final = """
UPDATE {t} SET state = 'cancelled', finished_at = :now
WHERE id = :job AND state = 'queued' AND execution_started_at IS NULL"""

# Before execution_started a claim can be given back: epoch stays, token is cleared, so the
# old owner's late start matches nothing and the next claim takes epoch + 1.
RECLAIM: Final = """
UPDATE {t} SET owner = NULL, claimed_at = NULL, token = NULL
WHERE state = 'queued' AND owner IS NOT NULL AND execution_started_at IS NULL"""

# A claim whose reply was lost with the connection, given back by the store that sent it:
# only while the row still carries that attempt's token and nothing started.
GIVE_BACK: Final = RECLAIM + " AND id = :job AND token = :token"

# After execution_started nothing is re-run: the platform fact becomes lost (or timeout).
MARK_LOST: Final = """
UPDATE {t} SET state = :state, finished_at = :now
WHERE state = 'running' AND execution_started_at IS NOT NULL"""

BY_OWNER: Final = " AND owner = :owner"
CLAIMED_BEFORE: Final = " AND claimed_at < :before"
STARTED_BEFORE: Final = " AND execution_started_at < :before"

CANDIDATES: Final = """
SELECT id FROM {t} WHERE state = 'queued' AND owner IS NULL
ORDER BY created_at LIMIT :n"""
GET: Final = "SELECT " + COLUMNS + " FROM {t} WHERE id = :job"
# When the oldest running job started (NULL: none running), for the stuck-job gauge.
OLDEST_RUNNING: Final = "SELECT MIN(execution_started_at) FROM {t} WHERE state = 'running'"
OWNERS: Final = """
SELECT DISTINCT owner FROM {t} WHERE owner IS NOT NULL AND state IN ('queued', 'running')"""


def check_table(name: str) -> str:
    """Table names are formatted into SQL, so only plain lower-case identifiers pass."""
    if not _IDENT.match(name):
        from ..core.errors import ConfigError

        raise ConfigError(f"table name {name!r} must match {_IDENT.pattern}",
                          source="job store")
    return name


def to_pyformat(sql: str) -> str:
    """``:name`` -> ``%(name)s`` for psycopg (``::`` casts are left alone)."""
    return _PARAM.sub(r"%(\1)s", sql.replace("%", "%%"))
