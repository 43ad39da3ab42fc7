"""The generated Grafana dashboards and the Prometheus/Alertmanager files, as package data.

``dashboards/`` and ``alerts/`` at the top of the repository are their source of truth;
this package reaches them through symlinks so a plain ``pip install`` carries them, and
``corevo-obs export`` copies them out without a checkout.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path
from typing import Final

from ..errors import CorevoObsError

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


def export(kinds: tuple[str, ...], dest: Path, *, force: bool = False) -> list[Path]:
    """Copy the shipped files under ``dest/<kind>/``; returns what was written.

    Nothing is written when any target exists with other content and ``force`` is off,
    so a user's edited copy is never lost half-way through.
    """
    plan = [(dest / a.kind / a.relpath, a.read()) for k in kinds for a in shipped(k)]
    if dest.exists() and not dest.is_dir():
        raise ExportError(f"{dest}: not a directory")
    if not force:
        clashes = [str(t) for t, data in plan if t.exists() and t.read_bytes() != data]
        if clashes:
            shown = ", ".join(clashes[:3]) + (" ..." if len(clashes) > 3 else "")
            raise ExportError(
                f"{len(clashes)} file(s) exist with other content: {shown} (--force replaces)"
            )
    written: list[Path] = []
    try:
        for target, data in plan:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
            tmp.write_bytes(data)
            os.replace(tmp, target)
            written.append(target)
    except OSError as exc:
        raise ExportError(f"cannot write under {dest}: {exc.strerror or exc}") from None
    return written
