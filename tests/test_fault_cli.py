"""Every hostile-input probe of the CLI ends in one line on stderr and a non-zero exit:
never a traceback, a hang, a partial write or a stray temp file.

Each probe runs ``python -m corevo_obs.cli.main`` in a subprocess with a timeout.
Permission probes drop the capabilities that let root ignore file modes (CI runs as
root); full-disk probes write to a real 64 KiB tmpfs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from corevo_obs.tooling.lint.runner import max_jobs

from .conftest import _need

ROOT = Path(__file__).parent.parent
BLOCKING = "import time\n\nasync def handler():\n    time.sleep(1)\n"
GOOD_SOURCE = (ROOT / "dashboards" / "offload.dashboard.py").read_text()
TIMEOUT = 60


def _as_user() -> list[str]:
    """A prefix that makes file modes count for this process even as root."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        _need("running as root without setpriv: cannot drop CAP_DAC_OVERRIDE")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search"]


def cli(*args: str, cwd: Path | None = None, drop_caps: bool = False
        ) -> subprocess.CompletedProcess[str]:
    prefix = _as_user() if drop_caps else []
    return subprocess.run([*prefix, sys.executable, "-m", "corevo_obs.cli.main", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT)


def assert_one_line_failure(done: subprocess.CompletedProcess[str], *names: str | Path
                            ) -> None:
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("corevo-obs: error:")]
    assert len(errors) == 1, done.stderr
    for name in names:
        assert str(name) in errors[0], (name, errors[0])


def temps_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if ".tmp" in p.name]


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 64 KiB tmpfs, filled to the last byte but for what the test puts first."""
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        _need(f"cannot mount a small tmpfs for the full-disk probes: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(mnt: Path) -> None:
    with open(mnt / "filler", "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 4096)
        except OSError:
            pass
    with pytest.raises(OSError):
        (mnt / "probe").write_bytes(b"x" * 4096)
    (mnt / "probe").unlink(missing_ok=True)


# --- lint: baseline -----------------------------------------------------------------

@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "app.py").write_text(BLOCKING)
    return tmp_path


@pytest.mark.parametrize("write", [False, True])
def test_baseline_that_is_a_directory(project: Path, write: bool) -> None:
    (project / "bl").mkdir()
    done = cli("lint", "--baseline", "bl", *(["--write-baseline"] if write else []), ".",
               cwd=project)
    assert_one_line_failure(done, "bl")
    assert done.returncode == 2 and list((project / "bl").iterdir()) == []


def test_write_baseline_into_a_missing_directory(project: Path) -> None:
    done = cli("lint", "--baseline", "no/such/dir/b.json", "--write-baseline", ".",
               cwd=project)
    assert_one_line_failure(done, "no/such/dir")
    assert not (project / "no").exists()


def test_write_baseline_into_a_read_only_directory(project: Path) -> None:
    ro = project / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        done = cli("lint", "--baseline", "ro/b.json", "--write-baseline", ".", cwd=project,
                   drop_caps=True)
    finally:
        ro.chmod(0o755)
    assert_one_line_failure(done, "ro")
    assert list(ro.iterdir()) == []


def test_write_baseline_on_a_full_disk_keeps_the_old_one(project: Path,
                                                         full_disk: Path) -> None:
    baseline = full_disk / "b.json"
    assert cli("lint", "--baseline", str(baseline), "--write-baseline", ".",
               cwd=project).returncode == 0
    old = baseline.read_bytes()
    (project / "more.py").write_text(BLOCKING)  # a rewrite would shrink or keep: it writes
    fill(full_disk)
    done = cli("lint", "--baseline", str(baseline), "--write-baseline", ".", cwd=project)
    assert_one_line_failure(done, full_disk)
    assert "No space left on device" in done.stderr
    assert baseline.read_bytes() == old
    assert temps_under(full_disk) == []


# --- lint: the tree -----------------------------------------------------------------

def test_a_fifo_named_py_is_reported_not_waited_on(project: Path) -> None:
    os.mkfifo(project / "a.py")
    started = time.monotonic()
    done = cli("lint", ".", cwd=project)
    assert time.monotonic() - started < 30
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "a.py:1:1: COB900" in done.stdout and "a FIFO" in done.stdout
    assert "app.py:4:5: COB104" in done.stdout  # the rest is still checked


def test_a_fifo_named_on_the_command_line(project: Path) -> None:
    os.mkfifo(project / "pipe.py")
    done = cli("lint", "pipe.py", cwd=project)
    assert done.returncode == 2 and "pipe.py:1:1: COB900" in done.stdout


def test_an_unreadable_directory_is_named_and_fails_the_run(project: Path) -> None:
    locked = project / "locked"
    locked.mkdir()
    (locked / "hidden.py").write_text(BLOCKING)
    locked.chmod(0)
    try:
        done = cli("lint", ".", cwd=project, drop_caps=True)
    finally:
        locked.chmod(0o755)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "locked:1:1: COB900" in done.stdout and "cannot list directory" in done.stdout
    assert "app.py:4:5: COB104" in done.stdout


def test_an_unreadable_file_is_named_and_fails_the_run(project: Path) -> None:
    secret = project / "secret.py"
    secret.write_text(BLOCKING)
    secret.chmod(0)
    done = cli("lint", ".", cwd=project, drop_caps=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "secret.py:1:1: COB900" in done.stdout and "Permission denied" in done.stdout


@pytest.mark.parametrize("jobs", ["0", "-3", "x", "1e3", ""])
def test_jobs_out_of_range(project: Path, jobs: str) -> None:
    done = cli("lint", "--jobs", jobs, ".", cwd=project)
    assert_one_line_failure(done, "--jobs")
    assert done.returncode == 2


def _children(pid: int) -> int:
    try:
        return len(Path(f"/proc/{pid}/task/{pid}/children").read_text().split())
    except OSError:
        return 0


def test_jobs_is_capped_at_the_cpus(tmp_path: Path) -> None:
    for i in range(260):  # above PARALLEL_MIN_FILES: the pool starts
        (tmp_path / f"m{i}.py").write_text(BLOCKING)
    proc = subprocess.Popen([sys.executable, "-m", "corevo_obs.cli.main", "lint", "--jobs",
                             "150", "."], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    most = 0
    deadline = time.monotonic() + TIMEOUT
    while proc.poll() is None and time.monotonic() < deadline:
        most = max(most, _children(proc.pid))
        time.sleep(0.005)
    out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 1, err
    assert f"--jobs 150 capped at {max_jobs()}" in err
    assert most <= max_jobs()
    assert out.count("COB104") == 260


# --- dashboards build ---------------------------------------------------------------

@pytest.mark.parametrize(("source", "says"), [
    ("raise RuntimeError('boom')\n", "raised RuntimeError: boom"),
    ("import sys\nsys.exit(3)\n", "raised SystemExit"),
    ("dashboard = (\n", "cannot parse"),
    ("dashboard = 5\n", "'dashboard' is a int, not a grafanalib Dashboard"),
    ("dashboard = 'x'\n", "not a grafanalib Dashboard"),
])
def test_a_bad_dashboard_source_is_named_and_nothing_is_written(tmp_path: Path, source: str,
                                                               says: str) -> None:
    (tmp_path / "a-good.dashboard.py").write_text(GOOD_SOURCE)
    (tmp_path / "bad.dashboard.py").write_text(source)
    done = cli("dashboards", "build", "--dir", str(tmp_path))
    assert_one_line_failure(done, tmp_path / "bad.dashboard.py", says)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-good.dashboard.py",
                                                          "bad.dashboard.py"]


def test_a_read_only_dashboard_json_is_refused(tmp_path: Path) -> None:
    (tmp_path / "x.dashboard.py").write_text(GOOD_SOURCE)
    out = tmp_path / "x.json"
    out.write_text("{}\n")
    out.chmod(0o444)
    done = cli("dashboards", "build", "--dir", str(tmp_path), drop_caps=True)
    assert_one_line_failure(done, out, "read-only")
    assert out.read_text() == "{}\n" and temps_under(tmp_path) == []


def test_a_dashboard_json_that_is_a_fifo_is_not_opened(tmp_path: Path) -> None:
    (tmp_path / "x.dashboard.py").write_text(GOOD_SOURCE)
    os.mkfifo(tmp_path / "x.json")
    for check in ([], ["--check"]):
        done = cli("dashboards", "build", "--dir", str(tmp_path), *check)
        assert_one_line_failure(done, tmp_path / "x.json", "FIFO")


def test_dashboards_build_on_a_full_disk(full_disk: Path) -> None:
    (full_disk / "x.dashboard.py").write_text(GOOD_SOURCE)
    fill(full_disk)
    done = cli("dashboards", "build", "--dir", str(full_disk))
    assert_one_line_failure(done, full_disk / "x.json", "No space left on device")
    assert not (full_disk / "x.json").exists() and temps_under(full_disk) == []


# --- export ---------------------------------------------------------------------------

def test_export_on_a_full_disk_leaves_nothing_behind(full_disk: Path) -> None:
    dest = full_disk / "out"
    done = cli("export", "all", str(dest))  # 300 KiB of files into 64 KiB
    assert_one_line_failure(done, dest, "No space left on device")
    assert temps_under(full_disk) == []
    assert not dest.exists()                  # no half export, not even its folders


def test_export_after_a_failure_succeeds_and_is_complete(tmp_path: Path,
                                                         full_disk: Path) -> None:
    assert cli("export", "all", str(full_disk / "out")).returncode != 0
    done = cli("export", "all", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == len(list((tmp_path / "out").rglob("*.*")))


def test_export_force_onto_a_read_only_file(tmp_path: Path) -> None:
    dest = tmp_path / "out"
    assert cli("export", "alerts", str(dest)).returncode == 0
    target = next(p for p in sorted((dest / "alerts").rglob("*.yml")))
    target.write_text("edited\n")
    target.chmod(0o444)
    done = cli("export", "alerts", str(dest), "--force", drop_caps=True)
    assert_one_line_failure(done, target, "read-only")
    assert target.read_text() == "edited\n" and temps_under(dest) == []


def test_export_onto_a_fifo_is_not_opened(tmp_path: Path) -> None:
    dest = tmp_path / "out"
    assert cli("export", "alerts", str(dest)).returncode == 0
    target = next(p for p in sorted((dest / "alerts").rglob("*.yml")))
    target.unlink()
    os.mkfifo(target)
    for force in ([], ["--force"]):
        done = cli("export", "alerts", str(dest), *force)
        assert_one_line_failure(done, target)
    assert temps_under(dest) == []


def test_export_into_a_read_only_directory(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        done = cli("export", "all", str(ro / "out"), drop_caps=True)
    finally:
        ro.chmod(0o755)
    assert_one_line_failure(done, ro)
    assert list(ro.iterdir()) == []


# --- loadtest workload, dump ------------------------------------------------------------

def test_a_fifo_as_workload_is_refused_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "w.toml")
    t0 = time.monotonic()
    done = cli("loadtest", "http://127.0.0.1:9", "--workload", str(tmp_path / "w.toml"))
    assert time.monotonic() - t0 < 20  # answered, not blocked on a FIFO without a writer
    assert_one_line_failure(done, tmp_path / "w.toml", "FIFO")
    assert done.returncode == 2


def test_a_deeply_nested_workload_is_one_line(tmp_path: Path) -> None:
    deep = tmp_path / "w.toml"
    deep.write_text("seed = " + "[" * 5000 + "]" * 5000 + "\n")
    done = cli("loadtest", "http://127.0.0.1:9", "--workload", str(deep))
    assert_one_line_failure(done, deep, "nested too deeply")
    assert done.returncode == 2  # bad input, not an internal error (3)


def test_dump_timeout_range_is_stated_as_accepted() -> None:
    for bad in ("0", "601", "nan", "-1"):
        done = cli("dump", str(os.getpid()), "--timeout", bad)
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert "more than 0 and at most 600 seconds" in done.stderr, done.stderr
