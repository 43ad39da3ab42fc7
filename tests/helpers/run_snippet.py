"""Run one docs code block as a reader would paste it.

A block that uses ``await`` at the top level runs as in ``python -m asyncio`` (the asyncio
REPL): compiled with top-level await allowed, its coroutine driven by ``asyncio.run``.
Usage: ``python -m tests.helpers.run_snippet FILE``.
"""

from __future__ import annotations

import ast
import asyncio
import sys
import types


def main(path: str) -> None:
    source = open(path, encoding="utf-8").read()
    code = compile(source, path, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    module = types.ModuleType("__main__")
    module.__file__ = path
    sys.modules["__main__"] = module
    result = eval(code, module.__dict__)  # noqa: S307 - the docs' own code, on purpose
    if asyncio.iscoroutine(result):
        asyncio.run(result)


if __name__ == "__main__":
    main(sys.argv[1])
