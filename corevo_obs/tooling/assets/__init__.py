"""The generated Grafana dashboards and the Prometheus/Alertmanager files, as package data.

``dashboards/`` and ``alerts/`` at the top of the repository are their source of truth;
this package reaches them through symlinks so a plain ``pip install`` carries them, and
``corevo-obs export`` copies them out without a checkout.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Final

from ...core.errors import CorevoObsError
from ...core.fileio import read_regular, write_files

KINDS: Final = ("dashboards", "alerts")


class ExportError(CorevoObsError):
    """An export would overwrite a different file, or the destination is unusable."""


@dataclass(frozen=True)
class Asset:
    kind: str
    relpath: str  # inside the kind's folder, with "/" separators
    source: Traversable

    def read(self) -> bytes:
        return self.source.read_bytes()


def _walk(node: Traversable, prefix: str) -> list[tuple[str, Traversable]]:
    out: list[tuple[str, Traversable]] = []
    for child in sorted(node.iterdir(), key=lambda c: c.name):
        rel = f"{prefix}{child.name}"
        if child.is_dir():
            out.extend(_walk(child, rel + "/"))
        elif child.name.endswith((".json", ".yml")):
            out.append((rel, child))
    return out


def shipped(kind: str) -> list[Asset]:
    """Every shipped file of ``kind`` ("dashboards": Grafana JSON; "alerts": rules,
    promtool tests, Alertmanager example)."""
    if kind not in KINDS:
        raise ExportError(f"unknown asset kind {kind!r} (choose from {', '.join(KINDS)})")
    root = resources.files(__name__).joinpath(kind)
    if not root.is_dir():
        raise ExportError(f"this installation carries no {kind} (broken package data)")
    return [Asset(kind, rel, src) for rel, src in _walk(root, "")]


def _differs(target: Path, data: bytes) -> bool:
    """Whether ``target`` exists with other content; a FIFO or a folder there is an error
    (never opened blocking, never replaced)."""
    try:
        return read_regular(target) != data
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise ExportError(f"cannot read {target}: {exc.strerror or exc}") from None


def _missing_dirs(parents: Iterable[Path]) -> list[Path]:
    """Every folder an export has to create, outermost first (so they can go again)."""
    missing: dict[Path, None] = {}
    for parent in parents:
        chain = []
        while not parent.exists() and parent != parent.parent:
            chain.append(parent)
            parent = parent.parent
        missing.update((d, None) for d in reversed(chain))
    return sorted(missing, key=lambda d: len(d.parts))


def export(kinds: tuple[str, ...], dest: Path, *, force: bool = False) -> list[Path]:
    """Copy the shipped files under ``dest/<kind>/``; returns what was written.

    Nothing is written when any target exists with other content and ``force`` is off,
    so a user's edited copy is never lost half-way through; a write that fails (a full
    disk, a read-only file) replaces nothing and leaves no temp file.
    """
    plan = [(dest / a.kind / a.relpath, a.read()) for k in kinds for a in shipped(k)]
    if dest.exists() and not dest.is_dir():
        raise ExportError(f"{dest}: not a directory")
    if not force:
        clashes = [str(t) for t, data in plan if _differs(t, data)]
        if clashes:
            shown = ", ".join(clashes[:3]) + (" ..." if len(clashes) > 3 else "")
            raise ExportError(
                f"{len(clashes)} file(s) exist with other content: {shown} (--force replaces)"
            )
    made = _missing_dirs(t.parent for t, _ in plan)
    try:
        for directory in made:
            directory.mkdir(exist_ok=True)
        write_files(plan)
    except OSError as exc:
        for directory in reversed(made):  # leave no empty folders of a failed export
            with contextlib.suppress(OSError):
                directory.rmdir()
        where = exc.filename or dest
        raise ExportError(f"cannot write {where}: {exc.strerror or exc}") from None
    return [t for t, _ in plan]
