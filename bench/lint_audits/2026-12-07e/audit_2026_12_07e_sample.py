"""Sample findings per project and tool by the frozen protocol (seed in protocol.md).

Usage: python audit_2026_12_07e_sample.py samples.json
(reads the raw outputs under /tmp/2026-12-07e_raw).
"""

import json
import os
import random
import re
import sys
from collections import Counter
from typing import Any

SEED = 1823810670
RAW = "/tmp/2026-12-07e_raw"
SRC = "/tmp/2026-12-07e_src"

Finding = dict[str, Any]


def loc(path: str) -> str:
    """Location class of a path relative to the project root (protocol.md)."""
    parts = path.split("/")
    name = parts[-1]
    dirs = parts[:-1]
    if (
        any(p in ("test", "tests", "testing") for p in dirs)
        or name.startswith("test_")
        or name == "conftest.py"
    ):
        return "tests"
    if any(p.startswith("example") or p in ("docs", "samples", "contrib") for p in dirs):
        return "examples"
    return "library"


def key(f: Finding) -> tuple[str, int, int, str, str]:
    """The protocol's sort key."""
    return (f["path"], f["line"], f["col"], f["code"], f["msg"])


def finding(
    tool: str, root: str, path: str, line: int, col: int, code: str, msg: str, conf: str
) -> Finding:
    """One finding in the common shape."""
    return dict(
        tool=tool,
        path=path,
        line=line,
        col=col,
        code=code,
        msg=msg,
        conf=conf,
        loc=loc(path.replace(root, "")),
    )


def blocking(fs: list[Finding]) -> list[Finding]:
    """The peers' blocking-call codes (ASYNC2xx), the only ones judged."""
    return [f for f in fs if re.fullmatch(r"ASYNC2\d\d", f["code"])]


def main(out_path: str) -> None:
    """Write every scored list and its sample."""
    out: dict[str, dict[str, list[Finding]]] = {}
    for p in sorted(d for d in os.listdir(SRC) if os.path.isdir(os.path.join(SRC, d))):
        root = SRC + "/" + p + "/"
        with open(f"{RAW}/{p}.cob1.json") as fh:
            cob = [
                finding(
                    "cob",
                    root,
                    f["path"],
                    f["line"],
                    f["col"],
                    f["code"],
                    f["message"],
                    f["confidence"],
                )
                for f in json.load(fh)
            ]
        with open(f"{RAW}/{p}.ruff.json") as fh:
            ruff_all = [
                finding(
                    "ruff",
                    root,
                    f["filename"],
                    f["location"]["row"],
                    f["location"]["column"],
                    f["code"],
                    f["message"],
                    "-",
                )
                for f in json.load(fh)
            ]
        f8_all = []
        with open(f"{RAW}/{p}.f8.txt") as fh:
            for line in fh:
                path, row, col, code, text = line.rstrip("\n").split("|", 4)
                f8_all.append(
                    finding(
                        "f8", root, path.replace("//", "/"), int(row), int(col), code, text, "-"
                    )
                )
        print(
            p,
            dict(Counter(f["conf"] for f in cob)),
            "ruff",
            dict(Counter(f["code"] for f in ruff_all)),
            "f8",
            dict(Counter(f["code"] for f in f8_all)),
        )
        for tool, fs in (("cob", cob), ("ruff", blocking(ruff_all)), ("f8", blocking(f8_all))):
            fs = sorted(fs, key=key)
            out[f"{p}|{tool}"] = {
                "all": fs,
                "sample": random.Random(SEED).sample(fs, min(15, len(fs))),
            }
    with open(out_path, "w") as fh:
        json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
