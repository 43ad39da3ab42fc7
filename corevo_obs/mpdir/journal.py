"""The compaction journal: what makes a compaction SIGKILL-safe.

A compaction first writes complete accumulators under temporary names, then commits a
journal naming the renames and the dead files they replace, then renames, then moves
the dead files into ``.corevo/trash`` (unlinked later, outside the readers' lock), then
removes the journal. A crash before the journal commits leaves only temporaries
(discarded); a crash after it is rolled forward by whoever next takes the lock (writer
registration, collector, compactor), so the directory never counts a dead writer twice
or loses it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import CompactionError
from .layout import JOURNAL_FILE, TMP_SUFFIX, TRASH_DIR, WRITERS_DIR, state_dir
from .lock import dir_lock


def journal_path(directory: Path) -> Path:
    return state_dir(directory) / JOURNAL_FILE


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def commit(directory: Path, renames: list[tuple[str, str]], remove: list[str]) -> None:
    """Durably record the intent; from here on the compaction happens, crash or not."""
    path = journal_path(directory)
    tmp = path.with_name(path.name + TMP_SUFFIX)
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"renames": renames, "remove": remove}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def roll_forward(directory: Path) -> bool:
    """Finish a committed compaction, if its journal is there. Hold the lock exclusively.

    Returns whether a committed journal was found.
    """
    path = journal_path(directory)
    found = False
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        renames = [(str(a), str(b)) for a, b in data["renames"]]
        remove = [str(n) for n in data["remove"]]
    except FileNotFoundError:
        data = None
    except (ValueError, KeyError, TypeError) as exc:
        raise CompactionError(
            f"compaction journal is unreadable ({exc}); move it aside after checking the "
            "accumulators, then rerun", path=str(path),
        ) from None
    if data is not None:
        found = True
        for tmp, target in renames:
            if os.path.exists(directory / tmp):  # else this rename already happened
                os.replace(directory / tmp, directory / target)
        fsync_dir(directory)
        trash = state_dir(directory) / TRASH_DIR
        trash.mkdir(exist_ok=True)
        for name in remove:  # a rename, not an unlink: freeing blocks is slow, do it later
            try:
                os.replace(directory / name, trash / name.replace("/", "__"))
            except FileNotFoundError:
                pass
        path.unlink()
    return found


def empty_trash(directory: Path) -> None:
    """Free what commits moved out of sight. Needs no reader lock: no scrape looks there."""
    trash = state_dir(directory) / TRASH_DIR
    try:
        names = os.listdir(trash)
    except FileNotFoundError:
        return
    for name in names:
        try:
            os.unlink(trash / name)
        except FileNotFoundError:
            pass


def remove_debris(directory: Path) -> None:
    """Delete temporaries of crashed compactions. Hold both locks exclusively."""
    for d in (state_dir(directory), state_dir(directory) / WRITERS_DIR):
        for leftover in d.glob(f"*{TMP_SUFFIX}"):
            leftover.unlink(missing_ok=True)


def recover_if_needed(directory: Path) -> bool:
    """Roll a crashed compaction forward if its journal is there (cheap when it is not)."""
    if not journal_path(directory).exists():
        return False
    with dir_lock(directory, exclusive=True):
        return roll_forward(directory)


@contextmanager
def consistent_view(directory: Path) -> Iterator[None]:
    """Hold the readers' lock over a directory with no half-done compaction in it.

    The journal is checked again *under* the shared lock: a compactor SIGKILLed after its
    journal commit, between our first check and our lock, would otherwise leave us
    reading the new accumulator next to the dead files it replaced (counted twice), or
    registering a writer whose recycled pid's files the roll-forward then removes.
    """
    while True:
        recover_if_needed(directory)
        with dir_lock(directory, exclusive=False):
            if not journal_path(directory).exists():
                yield
                return
