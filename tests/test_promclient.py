"""prometheus_client's insides, used only by corevo_obs.core.promclient (the multiprocess
value file and merge): the installed release is one the module was checked against, and
the reserved value file is the format an unmodified reader reads (so a change in a new
release shows up here first; .ci/promclient_versions.sh runs this under both ends)."""

from __future__ import annotations

from importlib.metadata import version

from corevo_obs.core import promclient

from .test_fault_mpdir import env, mpdir, small_tmpfs  # noqa: F401 - fixtures used here


def _release() -> tuple[int, int]:
    major, minor = version("prometheus-client").split(".")[:2]
    return int(major), int(minor)


def test_installed_release_is_within_the_checked_range() -> None:
    low, high = promclient.SUPPORTED
    assert low <= _release() <= high, (
        f"prometheus_client {version('prometheus-client')} is outside the releases "
        f"core/promclient.py was checked against {low}..{high}: re-check its insides, "
        "then widen SUPPORTED")


def test_pyproject_range_and_ci_releases_match_supported() -> None:
    """pyproject's prometheus-client range is exactly SUPPORTED's, and CI tests both ends
    (.ci/promclient_versions.sh), so neither can widen without the other."""
    import re
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    deps = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    spec = next(d for d in deps if d.startswith("prometheus-client"))
    (lo_major, lo_minor), (hi_major, hi_minor) = promclient.SUPPORTED
    assert spec == f"prometheus-client>={lo_major}.{lo_minor},<{hi_major}.{hi_minor + 1}"
    script = (root / ".ci" / "promclient_versions.sh").read_text()
    releases = re.search(r"^RELEASES=\((.*)\)$", script, re.M)
    assert releases is not None
    tested = {tuple(int(x) for x in r.split(".")[:2]) for r in releases.group(1).split()}
    assert tested == set(promclient.SUPPORTED)


def test_reserved_value_file_is_prometheus_clients_format_with_no_holes(tmp_path) -> None:
    """What ``ReservedMmapedDict`` writes, an unmodified reader reads; and every byte of
    the file has its block (no hole a store could SIGBUS on when the disk is full)."""
    import os

    from prometheus_client.mmap_dict import MmapedDict

    path = str(tmp_path / "counter_1.db")
    d = promclient.ReservedMmapedDict(path)
    for i in range(5000):  # 160 KB: past 64 KiB, the file grows twice
        d.write_value(f"key-{i}", float(i), 0.0)
    d.close()
    st = os.stat(path)
    assert st.st_size == 256 << 10 and st.st_blocks * 512 >= st.st_size
    got = {k: v for k, v, *_ in MmapedDict.read_all_values_from_file(path)}
    assert len(got) == 5000 and got["key-4999"] == 4999.0
    again = promclient.ReservedMmapedDict(path)  # reopened: positions found, values kept
    again.write_value("key-7", 70.0, 0.0)
    again.close()
    got = {k: v for k, v, *_ in MmapedDict.read_all_values_from_file(path)}
    assert got["key-7"] == 70.0 and len(got) == 5000


def test_a_value_file_is_created_whole_or_not_at_all(small_tmpfs) -> None:  # noqa: F811
    """On a full file system a new value file does not appear at all (an unmodified
    ``MultiProcessCollector`` fails every scrape on a 0-byte ``*.db``); once there is room
    the retry thread's pass puts it in place whole, every held value in it. A 0-byte file
    left at the name (a writer that died creating it) is replaced."""
    import os

    from prometheus_client import CollectorRegistry
    from prometheus_client.mmap_dict import MmapedDict, mmap_key
    from prometheus_client.multiprocess import MultiProcessCollector

    from .test_fault_mpdir import fill

    def key(i: int) -> str:
        return mmap_key("c", "c_total", ["i"], [str(i)], "help")

    disk = small_tmpfs
    (disk / "counter_9.db").write_bytes(b"")  # debris: replaced while there is room
    debris = promclient.ReservedMmapedDict(str(disk / "counter_9.db"))
    debris.write_value(key(-1), 2.0, 0.0)
    debris.close()
    assert os.path.getsize(disk / "counter_9.db") == 1 << 16
    filler = fill(disk)
    path = disk / "counter_1.db"
    d = promclient.ReservedMmapedDict(str(path))
    for i in range(100):
        d.write_value(key(i), float(i), 0.0)
    assert sorted(os.listdir(disk)) == ["counter_9.db", "filler"]  # nothing half-made
    reg = CollectorRegistry()
    MultiProcessCollector(reg, path=str(disk))
    assert [s.value for m in reg.collect() for s in m.samples] == [2.0]  # no struct.error
    assert promclient.flush_held() >= 1  # still no room
    filler.unlink()
    child = os.fork()
    if child == 0:  # what prometheus_client does to inherited files after a fork
        d.close()
        os._exit(1 if path.exists() else 0)
    assert os.waitpid(child, 0)[1] == 0, "a forked child wrote its parent's held values"
    assert promclient.flush_held() == 0
    d.write_value(key(100), 100.0, 0.0)  # the mapped file again
    got = {k: v for k, v, *_ in MmapedDict.read_all_values_from_file(str(path))}
    assert got == {key(i): float(i) for i in range(101)}
    d.close()
    assert sorted(os.listdir(disk)) == ["counter_1.db", "counter_9.db"]


def test_a_killed_writers_value_temporary_is_removed_by_compaction(tmp_path) -> None:
    """A writer SIGKILLed between creating its value file's temporary and linking it in
    leaves ``.counter_<pid>.db.<pid>.tmp``: no reader sees it, and a compaction removes
    it once no process has that pid (never the temporary of a running one)."""
    import os
    import subprocess

    from corevo_obs.mpdir import compact

    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = tmp_path / f".counter_{gone.pid}.db.{gone.pid}.tmp"
    live = tmp_path / f".counter_{os.getpid()}.db.{os.getpid()}.tmp"
    other = tmp_path / ".notes.tmp"
    for p in (dead, live, other):
        p.write_bytes(bytes(64))
    compact(tmp_path)
    assert not dead.exists() and live.exists() and other.exists()
