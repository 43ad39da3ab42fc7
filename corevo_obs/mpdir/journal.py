"""The compaction journal: what makes a compaction SIGKILL-safe, and what is refused in it.

A compaction first writes complete accumulators under temporary names, then commits a
journal naming the renames and the dead files they replace, then renames, then moves
the dead files into ``.corevo/trash`` (unlinked later, outside the readers' lock), then
removes the journal. A crash before the journal commits leaves only temporaries
(discarded); a crash after it is rolled forward by whoever next takes the lock (writer
registration, collector, compactor), so the directory never counts a dead writer twice
or loses it.

The journal is input from whoever can write the directory. Every entry must have the
exact shape a compaction writes (``layout.is_journal_rename`` / ``journal_removal``:
bare names of this directory, never a path); a journal with anything else, or one that
does not parse, is renamed aside (``journal.json.corrupt-<time>-<pid>``), counted and
logged, and nothing in it is done. It never blocks a scrape or a worker start.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from ..core.guard import absorb
from .errors import CompactionError
from .layout import (
    JOURNAL_FILE,
    STATE_DIR,
    TMP_SUFFIX,
    TRASH_DIR,
    WRITERS_DIR,
    is_journal_rename,
    journal_removal,
    parse_name,
    state_dir,
    value_temp_pid,
)
from .lock import LockBusy, dir_lock
from .safe import (
    DirFds,
    aside_name,
    describe_at,
    exists_at,
    is_regular_at,
    listdir_fd,
    read_regular,
    state_exists,
    unlink_quiet,
    unsafe_reason,
    write_new,
)

_MAX_ATTEMPTS: Final = 3


class JournalRefused(CompactionError):
    """The journal does not parse or names something a compaction never touches."""


@dataclass
class Plan:
    """A validated journal: bare names only."""

    renames: list[tuple[str, str]] = field(default_factory=list)  # (.corevo name, top name)
    removals: list[tuple[str, str]] = field(default_factory=list)  # ("top"|"writers", name)


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
    data = json.dumps({"renames": renames, "remove": remove}).encode()
    tmp = JOURNAL_FILE + TMP_SUFFIX
    with DirFds(directory) as fds:
        unlink_quiet(fds.state, tmp)
        write_new(fds.state, tmp, data, str(journal_path(directory)) + TMP_SUFFIX)
        os.rename(tmp, JOURNAL_FILE, src_dir_fd=fds.state, dst_dir_fd=fds.state)
        os.fsync(fds.state)


def parse_plan(raw: bytes, where: str) -> Plan:
    """The journal's entries, each checked against what a compaction writes."""
    try:
        data = json.loads(raw.decode("utf-8"))
        renames = [(a, b) for a, b in data["renames"]]
        remove = list(data["remove"])
    except (ValueError, KeyError, TypeError) as exc:
        raise JournalRefused(f"does not parse ({type(exc).__name__}: {exc})", path=where) \
            from None
    plan = Plan()
    bad: list[object] = []
    for tmp, target in renames:
        if isinstance(tmp, str) and isinstance(target, str) and is_journal_rename(tmp, target):
            plan.renames.append((tmp[len(STATE_DIR) + 1:], target))
        else:
            bad.append([tmp, target])
    for name in remove:
        removal = journal_removal(name) if isinstance(name, str) else None
        if removal is None:
            bad.append(name)
        else:
            plan.removals.append(removal)
    if bad:
        shown = ", ".join(repr(b)[:80] for b in bad[:3]) + (" ..." if len(bad) > 3 else "")
        raise JournalRefused(
            f"names {len(bad)} entries a compaction never writes ({shown})", path=where
        )
    return plan


def load_plan(fds: DirFds) -> Plan | None:
    """The pending journal, or None; raises ``JournalRefused`` for one not to act on."""
    where = fds.where(STATE_DIR, JOURNAL_FILE)
    try:
        raw = read_regular(fds.state, JOURNAL_FILE, where)
    except FileNotFoundError:
        return None
    except OSError as exc:  # a directory, FIFO or symlink planted under its name
        raise JournalRefused(exc.strerror or str(exc), path=where) from None
    return parse_plan(raw, where)


def _set_aside(fds: DirFds, exc: JournalRefused) -> None:
    aside = aside_name(JOURNAL_FILE, "corrupt")
    try:
        os.rename(JOURNAL_FILE, aside, src_dir_fd=fds.state, dst_dir_fd=fds.state)
        what = f"renamed to {aside}, nothing in it done"
    except FileNotFoundError:
        return
    except OSError as err:
        what = f"nothing in it done; could not rename it aside ({err.strerror})"
    absorb("mpdir-journal", JournalRefused(f"{exc.args[0]}; {what}", path=exc.path))


def pending_plan(fds: DirFds) -> Plan | None:
    """The journal to roll forward, or None; a refused journal counts as none (logged)."""
    try:
        return load_plan(fds)
    except JournalRefused as exc:
        absorb("mpdir-journal", exc)
        return None


def roll_forward(directory: Path) -> bool:
    """Finish a committed compaction, if its journal is there. Hold the lock exclusively.

    Returns whether a committed journal was found. A refused journal is renamed aside.
    A rename that fails (something planted at its target) keeps that file type's dead
    files in place, so nothing is counted twice; the rest of the commit goes on.
    """
    with DirFds(directory, create=True) as fds:
        try:
            plan = load_plan(fds)
        except JournalRefused as exc:
            _set_aside(fds, exc)
            return False
        if plan is None:
            return False
        failed: set[str] = set()
        for tmp, target in plan.renames:
            try:
                os.rename(tmp, target, src_dir_fd=fds.state, dst_dir_fd=fds.top)
            except FileNotFoundError:
                pass  # this rename already happened
            except OSError as exc:
                failed.add(_prefix(target))
                absorb("mpdir-commit", CompactionError(
                    f"cannot rename the new accumulator in ({exc.strerror}); its dead "
                    "files stay for the next compaction", path=fds.where(target)))
        fsync_dir(directory)
        _move_to_trash(fds, plan, failed)
        unlink_quiet(fds.state, JOURNAL_FILE)
        os.fsync(fds.state)
    return True


def _prefix(name: str) -> str:
    parsed = parse_name(Path(name))
    return parsed.prefix if parsed is not None else name


def _move_to_trash(fds: DirFds, plan: Plan, failed: set[str]) -> None:
    """A rename, not an unlink: freeing blocks is slow, ``empty_trash`` does it later.

    The dead files' counts are in the accumulators now, so each must leave the directory
    whatever is in the trash: anything planted there under its name is set aside first,
    and a file that still cannot be moved is unlinked in place (never counted twice).
    """
    trash = fds.sub(TRASH_DIR)
    kept_pids = {
        str(p.pid) for where, name in plan.removals
        if where == "top" and (p := parse_name(Path(name))) is not None and p.prefix in failed
    }
    for where, name in plan.removals:
        if where == "top":
            if _prefix(name) in failed:
                continue
            src_fd, trash_name, shown = fds.top, name, fds.where(name)
        else:
            if name in kept_pids:
                continue
            src_fd, trash_name = fds.sub(WRITERS_DIR), f"record-{name}"
            shown = fds.where(STATE_DIR, WRITERS_DIR, name)
        refused = unsafe_reason(src_fd, name, shown)
        if refused is not None:  # a hard link could be anyone's file: neither moved nor unlinked
            absorb("mpdir-unsafe", CompactionError(f"{refused}; not moved", path=shown))
            continue
        if exists_at(trash, trash_name) and not is_regular_at(trash, trash_name):
            _quarantine(fds, trash, trash_name)
        try:
            os.rename(name, trash_name, src_dir_fd=src_fd, dst_dir_fd=trash)
        except FileNotFoundError:
            pass
        except OSError as exc:
            absorb("mpdir-unsafe", CompactionError(
                f"cannot move it to the trash ({exc.strerror}); unlinked in place", path=shown))
            unlink_quiet(src_fd, name)


def _quarantine(fds: DirFds, trash: int, name: str) -> None:
    """Move a non-file found in the trash out of the way (``.corevo/<name>.refused-...``),
    once, with a named message: it must not block a move or be counted on every pass."""
    where = fds.where(STATE_DIR, TRASH_DIR, name)
    kind = describe_at(trash, name)
    aside = aside_name(name, "refused")
    try:
        os.rename(name, aside, src_dir_fd=trash, dst_dir_fd=fds.state)
        what = f"set aside as {STATE_DIR}/{aside}"
    except FileNotFoundError:
        return
    except OSError as exc:
        what = f"could not set it aside ({exc.strerror})"
    absorb("mpdir-unsafe", CompactionError(
        f"{kind} planted in the trash; {what}",
        path=where))


def empty_trash(directory: Path) -> None:
    """Free what commits moved out of sight. Needs no reader lock: no scrape looks there.

    Only ``unlink`` at the trash's own fd: a directory planted in it is never descended,
    it is set aside (``_quarantine``).
    """
    try:
        with DirFds(directory, create=True) as fds:
            trash = fds.sub(TRASH_DIR)
            for name in listdir_fd(trash):
                if not is_regular_at(trash, name):
                    _quarantine(fds, trash, name)
                    continue
                try:
                    os.unlink(name, dir_fd=trash)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    absorb("mpdir-unsafe", CompactionError(
                        f"cannot unlink ({exc.strerror}); left", path=fds.where(
                            STATE_DIR, TRASH_DIR, name)))
    except FileNotFoundError:
        return


def remove_debris(directory: Path) -> None:
    """Delete temporaries of crashed compactions, and of value files whose writer was
    killed before linking them in (only once no process has that pid: a new one with it
    may be making its own). Hold both locks exclusively."""
    with DirFds(directory, create=True) as fds:
        for dir_fd in (fds.state, fds.sub(WRITERS_DIR)):
            for name in listdir_fd(dir_fd):
                if name.endswith(TMP_SUFFIX) and is_regular_at(dir_fd, name):
                    unlink_quiet(dir_fd, name)
        for name in listdir_fd(fds.top):
            pid = value_temp_pid(name)
            if pid is not None and not os.path.exists(f"/proc/{pid}") \
                    and os.path.isdir("/proc/self") and is_regular_at(fds.top, name):
                unlink_quiet(fds.top, name)


def journal_pending(directory: Path) -> bool:
    return state_exists(directory, JOURNAL_FILE)


def recover_if_needed(directory: Path, *, timeout: float) -> bool:
    """Roll a crashed compaction forward if its journal is there (cheap when it is not)."""
    if not journal_pending(directory):
        return False
    with dir_lock(directory, exclusive=True, timeout=timeout):
        return roll_forward(directory)


@contextmanager
def consistent_view(directory: Path, *, timeout: float) -> Iterator[bool]:
    """Hold the readers' lock over a directory with no half-done compaction in it.

    Yields True when it holds the lock, False when it could not get it within
    ``timeout`` (a stopped compactor, a foreign ``flock``): the body then reads without
    it (``unlocked_plan`` says how) instead of waiting.

    The journal is checked again *under* the shared lock: a compactor SIGKILLed after its
    journal commit, between our first check and our lock, would otherwise leave us
    reading the new accumulator next to the dead files it replaced (counted twice), or
    registering a writer whose recycled pid's files the roll-forward then removes.
    """
    deadline = time.monotonic() + timeout
    with ExitStack() as stack:
        locked = False
        for _ in range(_MAX_ATTEMPTS):
            left = max(0.0, deadline - time.monotonic())
            try:
                recover_if_needed(directory, timeout=left)
                inner = ExitStack()
                inner.enter_context(dir_lock(directory, exclusive=False, timeout=left))
            except LockBusy:
                break
            with DirFds(directory) as fds:
                clean = pending_plan(fds) is None
            if clean:
                stack.enter_context(inner)
                locked = True
                break
            inner.close()
        yield locked


def unlocked_plan(directory: Path) -> Plan | None:
    """The committed journal a reader without the lock must apply in its head, if any."""
    try:
        with DirFds(directory) as fds:
            return pending_plan(fds)
    except OSError:
        return None
