"""The multiprocess metrics directory as untrusted input: one test per probe of issue 15.

Real processes throughout: dead writers are real ``mp_writer.py`` processes (exited or
SIGKILLed), scrapes go over HTTP to a real ``MetricsServer`` (``mp_server.py``), and
compaction is the real ``corevo-obs metrics compact`` CLI in a subprocess. Counter sums
are compared before and after every step: they must never go down. Each test prints its
measured figures (``-s`` shows them) for bench/README.md.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import stat
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from corevo_obs.mpdir import LockedMultiProcessCollector, scan
from corevo_obs.mpdir.layout import metric_files

from .conftest import _need, helper_cmd

SCRAPE_BOUND = 2.0  # seconds: SCRAPE_WAIT (0.5 s) plus a loaded machine's slack
START_BOUND = 4.0  # seconds: REGISTER_WAIT (2 s) plus interpreter start on a loaded machine
NO_PRIV = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"]


# --- real processes ---------------------------------------------------------------

@pytest.fixture
def env(worker_env: dict[str, str]) -> dict[str, str]:
    """Writers that never compact at exit: compaction happens where a test says."""
    return dict(worker_env, COREVO_COMPACT_AT_EXIT="0", COREVO_WORKER="w0")


@pytest.fixture
def mpdir(env: dict[str, str]) -> Path:
    return Path(env["PROMETHEUS_MULTIPROC_DIR"])


def writers(env: dict[str, str], n: int, inc: int) -> None:
    """``n`` writers that count ``inc`` events each and exit."""
    for _ in range(n):
        subprocess.run(helper_cmd("mp_writer.py", "--inc", str(inc)), env=env, check=True,
                       capture_output=True, timeout=60)


def hold_writer(env: dict[str, str], inc: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(helper_cmd("mp_writer.py", "--hold", "--inc", str(inc)), env=env,
                            text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None
    json.loads(proc.stdout.readline())
    return proc


def cli(env: dict[str, str], *args: str, wrap: list[str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*(wrap or []), sys.executable, "-m", "corevo_obs.cli.main", *args],
                          env=env, capture_output=True, text=True, timeout=120)


class Server:
    """``mp_server.py``: a real MetricsServer in its own process."""

    def __init__(self, env: dict[str, str], *args: str, wrap: list[str] | None = None):
        self.proc = subprocess.Popen([*(wrap or []), *helper_cmd("mp_server.py", *args)],
                                     env=env, text=True, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"server did not start: {self.proc.communicate()[1]}")
        hello = json.loads(line)
        self.port, self.pid = int(hello["port"]), int(hello["pid"])

    def scrape(self) -> tuple[int, str, float]:
        """(HTTP status, body, seconds)."""
        t0 = time.perf_counter()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics",
                                        timeout=30) as resp:
                status, body = resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            status, body = exc.code, exc.read().decode(errors="replace")
        return status, body, time.perf_counter() - t0

    def events(self) -> float:
        status, body, _ = self.scrape()
        assert status == 200, body[-2000:]
        return events(body)

    def stop(self) -> str:
        """Stop it; its stderr."""
        if self.proc.poll() is None:
            _out, err = self.proc.communicate("\n", timeout=30)
        else:
            err = self.proc.communicate()[1]
        return err


@pytest.fixture
def serve() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for s in started:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.communicate()


def start(started: list[Server], env: dict[str, str], *args: str,
          wrap: list[str] | None = None) -> Server:
    server = Server(env, *args, wrap=wrap)
    started.append(server)
    return server


def events(body: str) -> float:
    return sum(s.value for fam in text_string_to_metric_families(body) for s in fam.samples
               if s.name == "mpt_events_total")


def errors(body: str, component: str) -> float:
    return sum(s.value for fam in text_string_to_metric_families(body) for s in fam.samples
               if s.name == "corevo_instrumentation_errors_total"
               and s.labels.get("component") == component)


def local_events(d: Path) -> float:
    reg = CollectorRegistry()
    LockedMultiProcessCollector(reg, path=str(d))
    return sum(s.value for m in reg.collect() for s in m.samples if s.name == "mpt_events_total")


def local_errors(d: Path, component: str) -> float:
    reg = CollectorRegistry()
    LockedMultiProcessCollector(reg, path=str(d))
    return sum(s.value for m in reg.collect() for s in m.samples
               if s.name == "corevo_instrumentation_errors_total"
               and s.labels.get("component") == component)


START_CATCHING = """
import sys
import corevo_obs
from corevo_obs.core.errors import MetricsDirError
try:
    corevo_obs.enable_multiprocess()
except MetricsDirError as exc:
    print(exc)
    sys.exit(7)
"""


def start_worker(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A new worker's start; exit 7 and the message when it raises ``MetricsDirError``."""
    return subprocess.run([sys.executable, "-c", START_CATCHING], env=env,
                          capture_output=True, text=True, timeout=60)


def need_tool(name: str) -> None:
    if shutil.which(name) is None:
        _need(f"{name} not installed (util-linux)")


def figure(text: str) -> None:
    print(f"\n[reliability] {text}")


# --- symlinks and planted journals -------------------------------------------------

def test_trash_symlinked_outside_is_never_followed(env, mpdir, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    for i in range(5):
        (victim / f"precious{i}").write_text("x")
    writers(env, 2, inc=100)
    assert cli(env, "metrics", "compact", str(mpdir)).returncode == 0  # makes .corevo/trash
    writers(env, 2, inc=100)
    before = local_events(mpdir)
    trash = mpdir / ".corevo" / "trash"
    shutil.rmtree(trash)
    trash.symlink_to(victim)

    res = cli(env, "metrics", "compact", str(mpdir))
    assert res.returncode == 0, res.stderr
    assert sorted(os.listdir(victim)) == [f"precious{i}" for i in range(5)]
    assert trash.is_dir() and not trash.is_symlink()
    (aside,) = (mpdir / ".corevo").glob("trash.refused-*")
    assert aside.is_symlink()  # the planted link, kept for a human, never followed
    assert "refused" in res.stderr and "Traceback" not in res.stderr
    assert local_events(mpdir) == before == 400
    assert local_errors(mpdir, "mpdir-unsafe") == 1  # the CLI's count, left in DIR


def test_directory_planted_in_the_trash_never_wedges_the_directory(env, mpdir):
    """An empty directory at ``.corevo/trash/counter_<deadpid>.db`` used to fail every
    commit's move into the trash: the journal stayed pending, every compaction and worker
    start failed, and an unmodified collector counted the dead writer twice."""
    from prometheus_client import multiprocess

    writers(env, 2, inc=100)
    dead = sorted({f.pid for f in metric_files(mpdir) if f.pid is not None})
    trash = mpdir / ".corevo" / "trash"
    trash.mkdir(parents=True, exist_ok=True)
    (trash / f"counter_{dead[0]}.db").mkdir()
    (trash / "histogram_1.db").mkdir()  # any other name: set aside by the trash's emptying
    assert local_events(mpdir) == 200

    res = cli(env, "metrics", "compact", str(mpdir))
    assert res.returncode == 0, res.stderr
    assert f"trash/counter_{dead[0]}.db: a directory planted in the trash" in res.stderr
    assert "Traceback" not in res.stderr
    assert not (mpdir / ".corevo" / "journal.json").exists()
    assert sorted(p.name.split(".refused-")[0] for p in (mpdir / ".corevo").glob(
        "*.refused-*")) == [f"counter_{dead[0]}.db", "histogram_1.db"]
    assert os.listdir(trash) == []
    assert not any(f.pid in dead for f in metric_files(mpdir))
    assert start_worker(env).returncode == 0
    assert cli(env, "metrics", "compact", str(mpdir)).returncode == 0
    reg = CollectorRegistry()
    multiprocess.MultiProcessCollector(reg, path=str(mpdir))  # prometheus_client, unmodified
    unmodified = sum(s.value for m in reg.collect() for s in m.samples
                     if s.name == "mpt_events_total")
    assert unmodified == local_events(mpdir) == 200, "counted once, never twice"


def test_hard_link_planted_as_a_dead_writers_file_is_refused(env, mpdir, tmp_path):
    """The docs say hard links are refused: neither folded nor moved nor unlinked, for a
    dropped file type (live gauges) as for a folded one."""
    writers(env, 1, inc=10)
    (pid,) = {f.pid for f in metric_files(mpdir) if f.pid is not None}
    outside = tmp_path / "someone"
    outside.mkdir()
    for prefix in ("gauge_all", "counter"):
        shutil.copy(mpdir / f"{prefix}_{pid}.db", outside / f"{prefix}.db")
        os.link(outside / f"{prefix}.db", mpdir / f"{prefix}_999994.db")
    res = cli(env, "metrics", "compact", str(mpdir))
    assert res.returncode == 1, res.stdout + res.stderr  # 1: files left in place, named
    for prefix in ("gauge_all", "counter"):
        name = f"{prefix}_999994.db"
        assert name in res.stderr and "hard links" in res.stderr, res.stderr
        assert os.stat(mpdir / name).st_nlink == 2, f"{name} was moved or unlinked"
        assert os.stat(outside / f"{prefix}.db").st_nlink == 2
    assert local_events(mpdir) == 10


def test_state_directory_symlinked_outside_is_refused(env, mpdir, tmp_path):
    outside = tmp_path / "etc"
    outside.mkdir()
    (outside / "passwd").write_text("root:x:0:0")
    writers(env, 2, inc=10)
    shutil.rmtree(mpdir / ".corevo")
    (mpdir / ".corevo").symlink_to(outside)

    res = cli(env, "metrics", "compact", str(mpdir))
    assert res.returncode == 2 and "symlink" in res.stderr, res.stderr
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    started = start_worker(env)
    assert started.returncode == 7 and "symlink" in started.stdout, started
    assert local_events(mpdir) == 20  # a scrape reads DIR without its state
    assert sorted(os.listdir(outside)) == ["passwd"]  # no lock, record or trash made there


def test_planted_journal_paths_are_refused_by_a_scrape_and_the_cli(env, mpdir, tmp_path,
                                                                   serve):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    writers(env, 2, inc=50)
    src = tmp_path / "outside_src.db"
    shutil.copy(next(f.path for f in metric_files(mpdir) if f.prefix == "counter"), src)
    server = start(serve, env)
    before = server.events()
    journal = mpdir / ".corevo" / "journal.json"
    planted = {"renames": [[".corevo/../../outside_src.db", "counter_compacted.db"]],
               "remove": ["../victim", ".corevo/writers/../../../victim"]}
    journal.write_text(json.dumps(planted))

    status, body, seconds = server.scrape()
    assert status == 200 and events(body) == before == 100
    assert victim.read_text() == "precious" and src.exists()
    assert not (mpdir / "counter_compacted.db").exists()  # nothing pulled in
    assert not journal.exists()
    (aside,) = (mpdir / ".corevo").glob("journal.json.corrupt-*")
    assert json.loads(aside.read_text()) == planted
    assert errors(server.scrape()[1], "mpdir-journal") >= 1  # counted, in the exposition

    journal.write_text(json.dumps(planted))  # again, this time for the CLI
    res = cli(env, "metrics", "compact", str(mpdir))
    assert res.returncode == 0 and "never writes" in res.stderr, res.stderr
    assert victim.read_text() == "precious" and src.exists()
    assert server.events() == before
    figure(f"planted journal (../ paths): refused by a scrape in {seconds * 1000:.0f} ms, "
           "0 outside files touched")


def test_corrupt_accumulator_is_never_replaced_and_no_counter_goes_back(env, mpdir, serve):
    writers(env, 2, inc=100)
    assert cli(env, "metrics", "compact", str(mpdir)).returncode == 0
    writers(env, 2, inc=100)
    acc = mpdir / "counter_compacted.db"
    original = acc.read_bytes()
    damaged = b"\0" * 4 + original[4:]
    acc.write_bytes(damaged)
    dead_counters = {f.path.name for f in metric_files(mpdir)
                     if f.prefix == "counter" and not f.is_accumulator}
    server = start(serve, env)
    before = server.events()  # the damaged accumulator is left out (named), not read as 0
    assert before == 200

    res = cli(env, "metrics", "compact", str(mpdir))
    assert res.returncode == 1, res.stdout + res.stderr
    assert "counter_compacted.db" in res.stderr and "not replaced" in res.stderr
    assert "Traceback" not in res.stderr
    assert acc.read_bytes() == damaged  # left in place, byte for byte
    assert dead_counters <= {f.path.name for f in metric_files(mpdir)}  # not folded
    after = server.events()
    assert after >= before

    acc.write_bytes(original)  # what an operator restores: nothing was lost
    assert server.events() == 400
    assert cli(env, "metrics", "compact", str(mpdir)).returncode == 0
    assert server.events() == 400
    assert scan(mpdir).dead_writers == {}


def test_corrupt_journal_never_blocks_a_scrape_or_a_worker_start(env, mpdir, serve):
    writers(env, 2, inc=10)
    journal = mpdir / ".corevo" / "journal.json"
    journal.write_text('{"renames": [["half a journal')
    t0 = time.perf_counter()
    writers(env, 1, inc=10)  # a new worker starts and exits
    started_in = time.perf_counter() - t0
    assert not journal.exists()
    assert len(list((mpdir / ".corevo").glob("journal.json.corrupt-*"))) == 1
    journal.write_text("not json at all")
    server = start(serve, env)
    status, body, seconds = server.scrape()
    assert status == 200 and events(body) == 30
    assert len(list((mpdir / ".corevo").glob("journal.json.corrupt-*"))) == 2
    assert errors(body, "mpdir-journal") >= 2  # the worker's and the server's, counted
    figure(f"corrupt journal: worker start+exit {started_in:.2f} s, scrape "
           f"{seconds * 1000:.0f} ms, journal set aside")


# --- bounded lock waits ------------------------------------------------------------

def lock_is_held(path: Path) -> bool:
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


ENABLE_TIMED = (
    "import time, json; t0 = time.perf_counter(); import corevo_obs; "
    "corevo_obs.enable_multiprocess(); print(json.dumps(time.perf_counter() - t0))"
)


def timed_start(env: dict[str, str]) -> float:
    """A new worker's ``enable_multiprocess``, timed inside it (import included)."""
    res = subprocess.run([sys.executable, "-c", ENABLE_TIMED], env=env, capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return float(res.stdout)


def test_foreign_flock_bounds_scrapes_and_worker_starts(env, mpdir, serve):
    need_tool("flock")
    writers(env, 3, inc=10)
    server = start(serve, env)
    lock = mpdir / ".corevo" / "lock"
    holder = subprocess.Popen(["flock", "-x", str(lock), "sleep", "6"])
    try:
        deadline = time.monotonic() + 10
        while not lock_is_held(lock):
            assert time.monotonic() < deadline, "flock never took the lock"
            time.sleep(0.01)
        status, body, scrape_s = server.scrape()
        start_s = timed_start(env)
        still_held = holder.poll() is None
    finally:
        holder.kill()
        holder.wait()
    assert still_held
    assert status == 200 and events(body) == 30
    assert scrape_s < SCRAPE_BOUND and start_s < START_BOUND
    assert errors(server.scrape()[1], "mpdir-lock") >= 1
    figure(f"flock -x on .corevo/lock for 6 s: scrape {scrape_s:.2f} s (exact totals), "
           f"worker enable_multiprocess {start_s:.2f} s (registered without the lock)")


def wait_stopped(pid: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    while True:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state == "T":
            return
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "compactor never reached its stage"
        time.sleep(0.01)


@pytest.mark.parametrize("stage", ["after_commit", "after_rename"])
def test_compactor_stopped_mid_commit_freezes_no_one(env, mpdir, serve, stage):
    writers(env, 6, inc=10)
    server = start(serve, env)
    assert server.events() == 60
    comp = subprocess.Popen(helper_cmd("mp_crash_compactor.py", "--die-at", stage, "--stop",
                                       str(mpdir)),
                            env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_stopped(comp.pid, comp)
        assert (mpdir / ".corevo" / "journal.json").exists()  # frozen with the journal out
        status, body, scrape_s = server.scrape()
        start_s = timed_start(env)
    finally:
        os.kill(comp.pid, signal.SIGCONT)
    out, err = comp.communicate(timeout=60)
    assert comp.returncode == 0, err
    # the journal applied in the scrape's head: the dead files left out, the waiting
    # accumulator read: exact, neither doubled nor missing
    assert status == 200 and events(body) == 60
    assert scrape_s < SCRAPE_BOUND and start_s < START_BOUND
    assert server.events() == 60
    assert not (mpdir / ".corevo" / "journal.json").exists()
    figure(f"compactor SIGSTOPped {stage}: scrape {scrape_s:.2f} s with exact totals, "
           f"worker enable_multiprocess {start_s:.2f} s")


# --- files that are not files --------------------------------------------------------

def test_non_regular_db_files_are_skipped_and_named(env, mpdir, tmp_path, serve):
    need_tool("setpriv")
    writers(env, 3, inc=10)
    dead = sorted({f.pid for f in metric_files(mpdir) if f.pid is not None})
    outside = tmp_path / "outside.db"
    shutil.copy(mpdir / f"counter_{dead[1]}.db", outside)
    os.mkfifo(mpdir / "counter_999991.db")
    (mpdir / "counter_999992.db").mkdir()
    (mpdir / "counter_999993.db").symlink_to(outside)
    locked = mpdir / f"counter_{dead[0]}.db"
    locked.chmod(0)
    planted = ["counter_999991.db", "counter_999992.db", "counter_999993.db", locked.name]
    # a scraper and a compactor without root's permission bypass, so mode 000 bites
    server = start(serve, env, wrap=NO_PRIV)
    status, body, scrape_s = server.scrape()
    assert status == 200, body[-2000:]
    assert scrape_s < SCRAPE_BOUND  # the FIFO was never opened for reading
    assert events(body) == 20  # the mode-000 writer left out; the link never followed
    assert errors(server.scrape()[1], "mpdir-collect") >= 1

    t0 = time.perf_counter()
    res = cli(env, "metrics", "compact", str(mpdir), wrap=NO_PRIV)
    compact_s = time.perf_counter() - t0
    assert res.returncode == 1, res.stdout + res.stderr
    for name in planted:
        assert name in res.stderr, name
    assert "Traceback" not in res.stderr
    assert (mpdir / "counter_compacted.db").exists()  # the others were compacted
    left = {f.path.name for f in metric_files(mpdir) if f.prefix == "counter"}
    assert left == {"counter_compacted.db", locked.name, f"counter_{server.pid}.db"}
    assert server.events() == 20  # never backwards
    assert stat.S_ISFIFO(os.lstat(mpdir / "counter_999991.db").st_mode)
    assert outside.exists() and (mpdir / "counter_999993.db").is_symlink()

    locked.chmod(0o644)  # readable again: its counts come back, nothing was lost
    assert server.events() == 30
    res = cli(env, "metrics", "compact", str(mpdir))
    assert res.returncode == 1 and locked.name not in res.stderr  # only the planted left
    assert server.events() == 30
    figure(f"FIFO + directory + symlink + mode 000 named counter_N.db: scrape "
           f"{scrape_s * 1000:.0f} ms (HTTP 200), compact {compact_s:.2f} s exit 1 naming all 4")


# --- a full disk and a read-only directory -------------------------------------------

@pytest.fixture
def small_tmpfs(mpdir: Path) -> Iterator[Path]:
    """A real 2 MiB tmpfs mounted over the metrics directory (needs root)."""
    need_tool("mount")
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mpdir)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        _need(f"cannot mount a 2 MiB tmpfs at {mpdir} (needs root / CAP_SYS_ADMIN): "
              f"{res.stderr.strip()}")
    yield mpdir
    subprocess.run(["umount", "-l", str(mpdir)], capture_output=True)


def fill(d: Path) -> Path:
    """Take every free block of the file system under ``d``."""
    filler = d / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        st = os.statvfs(d)
        if st.f_bavail:
            os.posix_fallocate(fd, 0, st.f_bavail * st.f_frsize)
        size = os.fstat(fd).st_size
        while True:
            try:
                os.posix_fallocate(fd, size, 4096)
                size += 4096
            except OSError:
                break
    finally:
        os.close(fd)
    return filler


def test_full_disk_no_sigbus_counted_errors_and_a_clear_start_error(env, small_tmpfs, serve):
    d = small_tmpfs
    writers(env, 2, inc=10)
    server = start(serve, env, "--compact-every", "0.2", "--warm", "mpdir-janitor")
    held = [hold_writer(env, inc=10) for _ in range(2)]
    deadline = time.monotonic() + 20
    while scan(d).dead_writers:  # the janitor compacts the two that exited
        assert time.monotonic() < deadline
        time.sleep(0.05)
    before = server.events()
    assert before == 40
    filler = fill(d)
    for proc in held:
        proc.kill()
        proc.communicate()
    time.sleep(1.5)  # ~7 janitor passes, each hitting ENOSPC
    assert server.proc.poll() is None, server.proc.communicate()  # alive: no SIGBUS
    status, body, _ = server.scrape()
    assert status == 200 and events(body) == before
    assert errors(body, "mpdir-janitor") >= 1
    assert len(scan(d).dead_writers) == 2
    assert not list((d / ".corevo").glob("*.tmp"))  # nothing half-written left behind

    res = cli(env, "metrics", "compact", str(d))
    assert res.returncode == 2, (res.returncode, res.stderr)  # -7 would be SIGBUS
    assert "No space left on device" in res.stderr and res.stderr.count("\n") == 1
    started = start_worker(env)
    assert started.returncode == 7, started.stderr
    assert "no room" in started.stdout or "No space" in started.stdout, started.stdout
    assert server.events() == before

    filler.unlink()
    deadline = time.monotonic() + 20
    while scan(d).dead_writers:  # room again: the janitor catches up by itself
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert server.events() == before
    err = server.stop()
    assert server.proc.returncode == 0 and "Traceback" not in err, err
    figure(f"full 2 MiB tmpfs: server alive, {errors(body, 'mpdir-janitor'):.0f} janitor "
           "errors counted in 1.5 s, CLI exit 2, enable_multiprocess MetricsDirError, "
           "compacted once space returned")


def steady(body: str) -> float:
    return sum(s.value for fam in text_string_to_metric_families(body) for s in fam.samples
               if s.name == "mpt_events_total" and s.labels.get("kind") == "steady")


def test_full_disk_kills_no_metric_writer_and_metrics_resume(env, small_tmpfs, serve):
    """App workers that keep creating series, and the janitor serving the host aggregate,
    while the disk fills and frees: no process dies (a store into a hole of an mmap'd value
    file on a full tmpfs was a SIGBUS, rc 135), the shortage is counted, and once there is
    room the counts written meanwhile reach the endpoint, none lost."""
    d = small_tmpfs
    server = start(serve, env, "--compact-every", "0.3")  # no --warm: no workaround
    apps = [subprocess.Popen(helper_cmd("mp_app_worker.py"), env=env, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE) for _ in range(2)]
    progress = [0, 0]
    finals: list[dict[str, int]] = [{}, {}]

    def follow(i: int, app: subprocess.Popen[str]) -> None:
        assert app.stdout is not None
        for line in app.stdout:
            said = json.loads(line)
            if "steady" in said:
                finals[i] = said
            elif "series" in said:
                progress[i] = said["series"]

    try:
        for app in apps:
            assert app.stdout is not None and json.loads(app.stdout.readline())["pid"]
        readers = [threading.Thread(target=follow, args=(i, app), daemon=True)
                   for i, app in enumerate(apps)]
        for r in readers:
            r.start()
        deadline = time.monotonic() + 20
        while steady(server.scrape()[1]) < 100:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        filler = fill(d)
        # each worker's value file must grow past what it had reserved when the disk
        # filled (capacity < 2 x its entries then, or the first 64 KiB: ~650 series)
        want = [2 * n + 700 for n in progress]
        deadline = time.monotonic() + 60
        while any(n < w for n, w in zip(progress, want, strict=True)):
            assert time.monotonic() < deadline, (progress, want)
            for proc in [server.proc, *apps]:
                assert proc.poll() is None, f"pid {proc.pid} died: rc {proc.returncode}"
            time.sleep(0.1)
        for proc in [server.proc, *apps]:
            assert proc.poll() is None, f"pid {proc.pid} died: rc {proc.returncode}"
        assert server.scrape()[0] == 200
        filler.unlink()
        time.sleep(2.5)  # a held file tries again every second
        for app in apps:
            assert app.stdin is not None and app.stderr is not None
            app.stdin.write("\n")
            app.stdin.close()
            assert app.wait(30) == 0
            assert "Traceback" not in app.stderr.read()
        for r in readers:
            r.join(10)
        wrote = {k: sum(f[k] for f in finals) for k in ("steady", "series")}
    finally:
        for app in apps:
            if app.poll() is None:
                app.kill()
                app.communicate()
    status, body, _ = server.scrape()
    series = sum(s.value for fam in text_string_to_metric_families(body) for s in fam.samples
                 if s.name == "mpt_events_total" and s.labels.get("kind", "").startswith("s0"))
    assert status == 200 and steady(body) == wrote["steady"], (steady(body), wrote)
    assert series == wrote["series"], (series, wrote)  # exact: none lost while held
    assert errors(body, "metrics-space") >= 2  # both workers' shortage, on the endpoint
    err = server.stop()
    assert server.proc.returncode == 0 and "Traceback" not in err, err
    figure(f"2 app workers + janitor on a full 2 MiB tmpfs: 0 processes died, "
           f"{errors(body, 'metrics-space'):.0f} shortages counted, {wrote['steady']} "
           f"increments and {wrote['series']} series all on the endpoint after space returned")



def half_made(d: Path) -> list[str]:
    """``*.db`` files (and temporaries) a stock reader trips on: shorter than the header,
    or a header claiming more bytes than the file has."""
    bad = [p.name for p in d.glob(".*.tmp")]
    for p in d.glob("*.db"):
        data = p.read_bytes()
        if len(data) < 8 or struct.unpack_from("i", data)[0] > len(data):
            bad.append(f"{p.name} ({len(data)} bytes)")
    return bad


def plain_events(d: Path) -> float:
    """What an unmodified ``MultiProcessCollector`` reads (the client_python recipe)."""
    reg = CollectorRegistry()
    MultiProcessCollector(reg, path=str(d))
    return sum(s.value for m in reg.collect() for s in m.samples if s.name == "mpt_events_total")


@pytest.mark.system
def test_full_disk_every_reader_reads_the_exact_totals(env, small_tmpfs, serve):
    """Writers, a serving process with compaction and a writer whose first metric comes
    while the 2 MiB disk is full: the suite's scrape, its locked reader and a plain
    ``MultiProcessCollector`` read the exact totals before, during and after (the
    server's own first write on the full disk left a 0-byte ``counter_<pid>.db``, on
    which the plain collector raised ``struct.error`` at every scrape, even once space
    was back and compaction had run)."""
    d = small_tmpfs
    writers(env, 2, inc=10)
    server = start(serve, env, "--compact-every", "0.2")  # no --warm: no metric written yet
    late = subprocess.Popen(helper_cmd("mp_writer.py", "--cue", "--hold", "--inc", "5"),
                            env=env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert late.stdout is not None and late.stdin is not None
    json.loads(late.stdout.readline())  # registered; its first write waits for the cue
    held = hold_writer(env, inc=10)

    def readers(want: float, phase: str) -> None:
        deadline = time.monotonic() + 20
        while scan(d).dead_writers or server.events() != want:
            assert time.monotonic() < deadline, (phase, server.events(), scan(d))
            time.sleep(0.1)
        assert half_made(d) == [], (phase, half_made(d))
        got = (server.events(), local_events(d), plain_events(d))
        assert got == (want, want, want), (phase, got)

    try:
        readers(30, "before")
        filler = fill(d)
        held.kill()
        held.communicate()
        late.stdin.write("\n")
        late.stdin.flush()
        json.loads(late.stdout.readline())  # its 5 counted, in its memory: no room
        time.sleep(1.5)  # ~7 janitor passes, each failing: the server's first metric write
        assert len(scan(d).dead_writers) == 1 and half_made(d) == [], half_made(d)
        got = (server.events(), local_events(d), plain_events(d))
        assert got == (30, 30, 30), ("during", got)
        assert all(p.poll() is None for p in (server.proc, late))
        filler.unlink()
        readers(35, "after: the held values written out, the dead writer compacted")
        late.stdin.write("\n")
        late.stdin.close()
        assert late.wait(30) == 0
        readers(35, "after the late writer exited and was compacted")
    finally:
        for proc in (held, late):
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    status, body, _ = server.scrape()
    assert errors(body, "mpdir-janitor") >= 1 and errors(body, "metrics-space") >= 1
    err = server.stop()
    assert server.proc.returncode == 0 and "Traceback" not in err, err
    figure("full 2 MiB tmpfs, 4 writers + a server compacting: its scrape, the locked "
           "reader and a plain MultiProcessCollector read 30/30/30 before and during, "
           "35/35/35 after; no 0-byte or short *.db at any point")


def test_exit_on_a_read_only_directory_prints_no_traceback(env, mpdir):
    need_tool("mount")
    writer = hold_writer(env, inc=3)
    try:
        # a read-only bind mount over the directory: the writer's open files stay
        # writable, every path it resolves from now on is on a read-only file system
        for cmd in (["mount", "--bind", str(mpdir), str(mpdir)],
                    ["mount", "-o", "remount,bind,ro", str(mpdir)]):
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode != 0:
                _need(f"cannot make {mpdir} read-only ({' '.join(cmd[:3])}): "
                      f"{res.stderr.strip()}")
        assert subprocess.run(["touch", str(mpdir / "probe")]).returncode != 0
        _out, err = writer.communicate("\n", timeout=60)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.communicate()
        subprocess.run(["umount", "-l", str(mpdir)], capture_output=True)
    assert writer.returncode == 0, err
    assert "Traceback" not in err, err
    assert "mpdir-exit" in err and "Read-only file system" in err  # logged, counted
    assert local_events(mpdir) == 3
