"""Run one docs code block as a reader would paste it.

A block that uses ``await`` at the top level runs as in ``python -m asyncio`` (the asyncio
REPL): compiled with top-level await allowed, its coroutine driven by ``asyncio.run``.
Usage: ``python -m tests.helpers.run_snippet FILE``, or by path with
``--not-under CHECKOUT FILE`` to run against the installed package (it fails if
``corevo_obs`` would be imported from CHECKOUT).
"""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import sys
import types
from pathlib import Path


def main(path: str) -> None:
    source = open(path, encoding="utf-8").read()
    code = compile(source, path, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    module = types.ModuleType("__main__")
    module.__file__ = path
    sys.modules["__main__"] = module
    result = eval(code, module.__dict__)  # noqa: S307 - the docs' own code, on purpose
    if asyncio.iscoroutine(result):
        asyncio.run(result)


def _installed_outside(checkout: str) -> None:
    spec = importlib.util.find_spec("corevo_obs")
    origin = Path(spec.origin if spec and spec.origin else checkout).resolve()
    if origin.is_relative_to(Path(checkout).resolve()):
        sys.exit(f"corevo_obs resolves to the checkout ({origin}), not an installed package")


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--not-under"]:
        _installed_outside(args[1])
        args = args[2:]
    main(args[0])
