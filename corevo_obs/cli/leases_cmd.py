"""``corevo-obs leases audit``: who holds a quota, how stale, and whose worker is gone.

Reads without changing anything (no reaping), so it is safe against production.
Exit 0, or 1 with ``--fail-on-orphans`` when a holder's process is provably gone.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from ..errors import ConfigError


def register(sub: Any) -> None:
    p = sub.add_parser("leases", help="inspect named leases")
    cmds = p.add_subparsers(dest="leases_command", metavar="COMMAND", required=True)
    a = cmds.add_parser("audit", help="report holders, oldest heartbeat and orphans of a quota")
    a.add_argument("quota")
    where = a.add_mutually_exclusive_group(required=True)
    where.add_argument("--redis", metavar="URL", help="Redis URL of the lease store")
    where.add_argument("--sqlite", metavar="PATH", help="SQLite file of the lease store")
    a.add_argument("--key", help="Redis key (default corevo:lease:QUOTA)")
    a.add_argument("--timeout", type=float, default=30.0,
                   help="the quota's lease timeout, to tell expired holders (default 30)")
    a.add_argument("--limit", type=int, default=None, help="the quota's limit, for the report")
    a.add_argument("--json", action="store_true", help="print one JSON object")
    a.add_argument("--fail-on-orphans", action="store_true",
                   help="exit 1 when a holder's process is gone")
    a.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from prometheus_client import CollectorRegistry

    from ..leases import LeaseAuditor, SqliteLeaseStore
    from ..observer import Observer

    opts: dict[str, Any] = {"limit": args.limit or 1, "timeout": args.timeout,
                            "worker": "cli", "observer": Observer(),
                            "registry": CollectorRegistry()}
    source = "corevo-obs leases audit"
    if not args.redis:
        if args.key:
            raise ConfigError("--key applies to --redis only", source=source)
        if not os.path.isfile(args.sqlite):  # an audit never creates a store
            raise ConfigError(f"{args.sqlite}: no such SQLite file", source=source)
    store: Any = None
    try:
        if args.redis:
            from ..leases.redis_store import RedisLeaseStore

            store = RedisLeaseStore(args.quota, args.redis, key=args.key, **opts)
        else:
            store = SqliteLeaseStore(args.quota, args.sqlite, **opts)
        report = LeaseAuditor(store).audit()
    except Exception as exc:  # noqa: BLE001 - one clear line, not a traceback
        raise ConfigError(f"cannot read the lease store: {exc}", source=source) from None
    finally:
        if store is not None:
            store.close()
    data = report.as_dict()
    if args.limit is None:
        data["limit"] = None
    data["at"] = time.time()
    if args.json:
        print(json.dumps(data))
    else:
        limit = "" if args.limit is None else f" of {args.limit}"
        print(f"quota {report.quota}: {report.held} held{limit}, "
              f"oldest heartbeat {report.oldest_age:.1f}s ago")
        for name in ("expired", "orphaned", "unknown"):
            for holder in data[name]:
                print(f"  {name:<8} {holder}")
    return 1 if args.fail_on_orphans and report.orphaned else 0
