"""When gunicorn kills a frozen UvicornWorker: seconds from the freeze to the master's
``WORKER TIMEOUT``, freezing at a random moment of the worker's notify cycle.

gunicorn hands its workers half its ``timeout``; uvicorn notifies from its loop at most
once per that half (checked once a second), and the master kills a worker whose last
notification is older than ``timeout``. So a freeze is killed anywhere from about
``timeout / 2`` to ``timeout`` in (docs/dashboards.md, "gunicorn's timeout").

    python bench/gunicorn_kill_time.py --timeout 20 --runs 6
"""

from __future__ import annotations

import argparse
import random
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

APP = '''
import time
async def app(scope, receive, send):
    if scope["type"] == "http":
        print(f"FREEZE {time.time():.3f}", flush=True)
        time.sleep(3600)  # the loop is frozen
'''


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _request(url: str) -> None:
    try:
        with urllib.request.urlopen(url, timeout=3600):
            pass
    except OSError:
        pass  # the worker was killed under it


def one(directory: Path, timeout: int) -> float | None:
    """Seconds from the freeze to the kill, or None (no kill within 3 timeouts)."""
    port = _port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-w", "1", "-k", "uvicorn.workers.UvicornWorker",
         "--timeout", str(timeout), "-b", f"127.0.0.1:{port}", "app:app"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=directory)
    lines: list[tuple[float, str]] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append((time.time(), line))

    threading.Thread(target=read, daemon=True).start()
    try:
        while not any("Application startup complete" in t for _, t in lines):
            time.sleep(0.1)
        time.sleep(random.uniform(0, timeout))  # noqa: S311 - a random phase, not security
        threading.Thread(target=_request, args=(f"http://127.0.0.1:{port}/",),
                         daemon=True).start()
        deadline = time.time() + 3 * timeout
        while not any("WORKER TIMEOUT" in t for _, t in lines) and time.time() < deadline:
            time.sleep(0.05)
        froze = [float(m.group(1)) for _, t in lines if (m := re.search(r"FREEZE ([\d.]+)", t))]
        killed = [at for at, t in lines if "WORKER TIMEOUT" in t]
        return killed[0] - froze[0] if froze and killed else None
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=int, default=20)
    parser.add_argument("--runs", type=int, default=6)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "app.py").write_text(APP)
        got = [t for t in (one(Path(tmp), args.timeout) for _ in range(args.runs))
               if t is not None]
    if not got:
        sys.exit("no kill seen")
    print(f"timeout {args.timeout}s, {len(got)} kills: "
          + ", ".join(f"{t:.1f}" for t in sorted(got))
          + f" s into the freeze (min {min(got):.1f}, max {max(got):.1f}; "
          f"{min(got) / args.timeout:.2f}..{max(got) / args.timeout:.2f} x timeout)")


if __name__ == "__main__":
    main()
