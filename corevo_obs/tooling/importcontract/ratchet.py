"""The git ratchet: the debt file may not gain an entry compared with a base revision.

Entries are compared as sets, so paying one debt while adding another still fails. The
default base is the merge base with the default branch. On that branch itself (or a
branch with no commits of its own) the change under review is the uncommitted edit of
the debt file if there is one (base ``HEAD``, as in a pre-commit hook), else the last
commit (base ``HEAD~1``, as in CI on main). When no base can be found (no git,
a shallow clone with one commit, no debt file at the base) the ratchet is skipped with a
note instead of failing: there is nothing to ratchet against yet.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ...core.errors import ConfigError
from .debt import DebtEntry, DebtFileError, parse_debt

BASE_ENV = "COREVO_DEBT_BASE"
AUTO = "auto"
OFF = frozenset({"none", "off"})
_DEFAULT_BRANCHES = ("main", "master", "origin/main", "origin/master")


class RatchetError(ConfigError):
    """An explicitly requested base revision does not exist."""


@dataclass(frozen=True)
class Baseline:
    """The debt entries at the base, or ``None`` with a note saying why none are compared."""

    rev: str | None
    entries: frozenset[DebtEntry] | None
    note: str


def _git(cwd: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def _commit(root: Path, rev: str) -> str | None:
    return _git(root, "rev-parse", "--verify", "-q", f"{rev}^{{commit}}")


def _default_branch(root: Path) -> str | None:
    origin_head = _git(root, "symbolic-ref", "-q", "--short", "refs/remotes/origin/HEAD")
    for name in (origin_head, *_DEFAULT_BRANCHES):
        if name and _commit(root, name):
            return name
    return None


def _auto_base(root: Path, rel: str) -> tuple[str | None, str]:
    head = _commit(root, "HEAD")
    if head is None:
        return None, "no commit yet"
    branch = _default_branch(root)
    if branch is not None:
        merge_base = _git(root, "merge-base", "HEAD", branch)
        if merge_base and merge_base != head:
            return merge_base, f"merge base with {branch}"
    if _git(root, "status", "--porcelain", "--", rel):
        return head, "HEAD: the debt file has uncommitted changes"
    parent = _commit(root, "HEAD~1")
    if parent is None:
        return None, "no default branch to compare with and HEAD has no parent (shallow clone?)"
    where = f"on {branch}" if branch else "no default branch found"
    return parent, f"HEAD~1 ({where})"


def resolve_base(requested: str | None, configured: str | None = None) -> str:
    """The base: the explicit request, else ``$COREVO_DEBT_BASE``, else the config, else auto."""
    return requested or os.environ.get(BASE_ENV) or configured or AUTO


def load_baseline(
    debt_path: str | Path, requested: str | None = None, configured: str | None = None
) -> Baseline:
    """Read the debt file's entries at the base revision (see the module docstring)."""
    base = resolve_base(requested, configured)
    if base.lower() in OFF:
        return Baseline(None, None, f"ratchet disabled (base {base!r})")
    path = Path(debt_path).resolve()
    root_text = _git(path.parent if path.parent.is_dir() else Path.cwd(), "rev-parse",
                     "--show-toplevel")
    if root_text is None:
        if base != AUTO:
            raise RatchetError(f"base {base!r} given but {path} is not in a git work tree")
        return Baseline(None, None, "not a git work tree: ratchet skipped")
    root = Path(root_text).resolve()
    try:
        rel = path.relative_to(root).as_posix()
    except ValueError:
        return Baseline(None, None, f"{path} is outside the git work tree: ratchet skipped")
    if base == AUTO:
        rev, how = _auto_base(root, rel)
        if rev is None:
            return Baseline(None, None, f"no git base ({how}): ratchet skipped")
    else:
        rev, how = _commit(root, base), base
        if rev is None:
            raise RatchetError(f"git base {base!r} is not a commit in {root}")
    label = f"{rev[:12]} ({how})"
    text = _git(root, "show", f"{rev}:{rel}")
    if text is None:
        return Baseline(rev, None, f"no debt file at base {label}: ratchet starts here")
    try:
        entries = parse_debt(text, source=f"{rev[:12]}:{rel}")
    except DebtFileError as exc:
        return Baseline(rev, None, f"debt file at base is invalid ({exc}): ratchet skipped")
    return Baseline(rev, entries, f"compared with {label}")
