"""What a deployment has before the docs' commands run: state directories and a lease DB."""

from pathlib import Path

from corevo_obs.leases import SqliteLeaseStore

Path("run/metrics").mkdir(parents=True, exist_ok=True)
Path("var/lib/app").mkdir(parents=True, exist_ok=True)
with SqliteLeaseStore("llm", "var/lib/app/leases.db", limit=10, timeout=30) as store:
    with store.hold(holder="deploy-check", wait=1):
        pass
