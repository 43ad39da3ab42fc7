"""A fallback for files the running ``ast`` rejects: let the newest installed Python parse
them. Under 3.11 a 3.12 ``type X = ...`` alias or ``def f[T]()`` is a syntax error, yet
valid code that the project runs elsewhere; one such file must not turn the run red.

The newer interpreter (found on PATH as ``python3.N`` or under pyenv's root; never a fixed
path) runs :mod:`._astjson` in isolated mode and prints the tree as JSON; it is rebuilt
here with the running Python's node classes. New statements with no equivalent become
``pass`` (a ``type`` alias becomes an assignment), new expressions ``None``, new fields
(``type_params``) are dropped: none of them can call anything at run time.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).with_name("_astjson.py")
PROBE_TIMEOUT = 10.0
PARSE_TIMEOUT = 60.0
_VERSION_DIR = re.compile(r"^3\.(\d+)\.\d+$")


def _probe(exe: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([exe, "-I", "-c", "import sys; print(*sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=PROBE_TIMEOUT, check=True)
        major, minor = map(int, out.stdout.split())
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return major, minor


@functools.lru_cache(maxsize=1)
def newer_pythons() -> tuple[tuple[tuple[int, int], str], ...]:
    """Installed interpreters newer than this one, newest first: ``((3, 13), path)``."""
    here = sys.version_info[:2]
    candidates: list[str] = []
    for minor in range(here[1] + 1, here[1] + 8):
        found = shutil.which(f"python3.{minor}")
        if found:
            candidates.append(found)
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    if root.is_dir():
        for entry in sorted(root.iterdir()):
            m = _VERSION_DIR.match(entry.name)
            if m and int(m.group(1)) > here[1] and (entry / "bin" / "python3").is_file():
                candidates.append(str(entry / "bin" / "python3"))
    found_versions: dict[tuple[int, int], str] = {}
    for exe in candidates:
        version = _probe(exe)
        if version is not None and version > here and version not in found_versions:
            found_versions[version] = exe
    return tuple(sorted(found_versions.items(), reverse=True))


def parse_with_newer(source: bytes, path: str) -> tuple[ast.Module | None, str]:
    """(tree, "Python 3.13") when the newest installed Python parses ``source``;
    (None, what it said) when it rejects it too; (None, "") when there is none."""
    pythons = newer_pythons()
    if not pythons:
        return None, ""
    (major, minor), exe = pythons[0]
    name = f"Python {major}.{minor}"
    try:
        proc = subprocess.run([exe, "-I", str(SCRIPT), path], input=source,
                              capture_output=True, timeout=PARSE_TIMEOUT, check=True)
        data = json.loads(proc.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None, ""
    if "tree" not in data:
        return None, f"{name} rejects it too: {data.get('error', 'invalid syntax')}"
    tree = _build(data["tree"])
    return (tree, name) if isinstance(tree, ast.Module) else (None, "")


def _build(obj: Any) -> Any:
    if isinstance(obj, list):
        return [_build(item) for item in obj]
    if not isinstance(obj, dict):
        return obj
    if "_bytes" in obj:
        return bytes.fromhex(obj["_bytes"])
    if "_complex" in obj:
        return complex(*obj["_complex"])
    if "_ellipsis" in obj:
        return ...
    kind, type_name = obj.get("_k"), obj.get("_t", "")
    positions = {k: obj[k] for k in ("lineno", "col_offset", "end_lineno", "end_col_offset")
                 if k in obj}
    if type_name == "TypeAlias":  # type X = ...  ->  X = ...
        target = _build(obj["name"])
        return ast.Assign(targets=[target], value=_build(obj["value"]), **positions)
    cls = getattr(ast, type_name, None)
    if not (isinstance(cls, type) and issubclass(cls, ast.AST)) or (
            kind == "stmt" and not issubclass(cls, ast.stmt)):
        if kind == "stmt":
            return ast.Pass(**positions)
        return ast.Constant(value=None, **positions) if kind == "expr" else None
    node = cls()
    for field in cls._fields:
        setattr(node, field, _build(obj.get(field)))
    for attr, value in positions.items():
        setattr(node, attr, value)
    return node
