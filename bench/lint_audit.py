"""Sample and score an outside lint audit (bench/lint_audits/<dir>), one module for every audit.

The audits 2026-12-07c/d/e each carried a copy of the same two scripts; this is that code once,
parametrized by what differed between them. Their samples.json and tables.md are frozen records:
this module must regenerate them byte for byte (tests/test_lint_audit_records.py checks it).

    python bench/lint_audit.py sample AUDIT_DIR --raw RAW --src SRC [--out PATH]
        draw the seeded sample (seed read from AUDIT_DIR/protocol.md) from the raw lint and
        peer outputs in RAW ({project}.cob1.json, .ruff.json, .f8.txt) for every project
        directory under SRC; writes AUDIT_DIR/samples.json unless --out is given.
    python bench/lint_audit.py report AUDIT_DIR --src SRC [--low-raw DIR]
        attach AUDIT_DIR/verdicts.json to AUDIT_DIR/samples.json and write AUDIT_DIR/tables.md;
        --low-raw (audit d) also counts each project's low-confidence findings from
        DIR/{project}.low.json in the corevo total column.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

NAMES = {"cob": "corevo-obs", "ruff": "ruff ASYNC2xx", "f8": "flake8-async ASYNC2xx"}
TOTAL_HEADER = "| project | corevo total (h/m/l) | sampled | true | false "
TOTAL_HEADER_LOW = (
    "| project | corevo default total (h/m; low with --min-confidence low) "
    "| sampled | true | false "
)

Finding = dict[str, Any]
Samples = dict[str, dict[str, list[Finding]]]


class AuditError(Exception):
    """Bad input: reported as one line, never a traceback."""


def protocol_seed(audit: Path) -> int:
    """The seed the audit's protocol.md fixed before any lint ran."""
    try:
        text = (audit / "protocol.md").read_text()
    except OSError as e:
        raise AuditError(f"cannot read the protocol: {e}") from None
    m = re.search(r"Random seed: (\d+)", text)
    if m is None:
        raise AuditError(f"{audit / 'protocol.md'}: no 'Random seed: N' line")
    return int(m.group(1))


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


def sample(seed: int, raw: str, src: str) -> Samples:
    """Every scored list and its sample, per project and tool."""
    out: Samples = {}
    for p in sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d))):
        root = src + "/" + p + "/"
        with open(f"{raw}/{p}.cob1.json") as fh:
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
        with open(f"{raw}/{p}.ruff.json") as fh:
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
        with open(f"{raw}/{p}.f8.txt") as fh:
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
                "sample": random.Random(seed).sample(fs, min(15, len(fs))),
            }
    return out


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """Wilson score interval of k successes in n."""
    if n == 0:
        return None
    p = k / n
    den = 1 + z * z / n
    c = (p + z * z / (2 * n)) / den
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, c - h), min(1.0, c + h)


def fmt(k: int, n: int) -> str:
    """Precision with its interval, in percent."""
    w = wilson(k, n)
    return (
        "n/a" if w is None else f"{round(100 * k / n)} % [{round(100 * w[0])}-{round(100 * w[1])}]"
    )


def attach(d: Samples, verdicts: dict[str, list[dict[str, Any]]]) -> None:
    """Attach each list's verdicts (fixed before scoring) to its sample, in sample order."""
    for k, v in d.items():
        for f, vd in zip(v["sample"], verdicts.get(k, []), strict=True):
            f.update(vd)


def tables(d: Samples, src: str, low_raw: str | None = None) -> str:
    """tables.md of scored samples; low_raw adds each project's low-confidence count."""
    src = src.rstrip("/") + "/"
    projects = sorted({k.split("|")[0] for k in d})
    rows, falses = [], []
    slices: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    per_proj: dict[str, dict[str, list[int]]] = {}
    tot = {"cob": [0, 0, 0], "ruff": [0, 0, 0], "f8": [0, 0, 0]}
    for p in projects:
        cells = [p]
        cob_all = d[f"{p}|cob"]["all"]
        h = sum(f["conf"] == "high" for f in cob_all)
        m = sum(f["conf"] == "medium" for f in cob_all)
        lo = 0
        if low_raw is not None:
            with open(f"{low_raw}/{p}.low.json") as fh:
                lo = sum(f["confidence"] == "low" for f in json.load(fh))
        pp: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for tool in ("cob", "ruff", "f8"):
            v = d[f"{p}|{tool}"]
            s = v["sample"]
            t = sum(f["verdict"] != "false" for f in s)
            total = f"{len(v['all'])} ({h}/{m}/{lo})" if tool == "cob" else str(len(v["all"]))
            cells += [total, str(len(s)), str(t), str(len(s) - t)]
            tot[tool][0] += len(s)
            tot[tool][1] += t
            tot[tool][2] += len(s) - t
            for f in s:
                ok = f["verdict"] != "false"
                name = NAMES[tool]
                keys = [name]
                if tool == "cob":
                    keys += [
                        f"corevo-obs {f['conf']}",
                        "corevo-obs all default",
                        f"corevo-obs {f['loc']}",
                        f"corevo-obs {f['conf']} x {f['loc']}",
                    ]
                    for kk in (f["conf"], f["loc"]):
                        pp[kk][0] += ok
                        pp[kk][1] += 1
                for kk in keys:
                    slices[kk][0] += ok
                    slices[kk][1] += 1
                if not ok:
                    where = f["path"].replace(src + p + "/", "") + f":{f['line']}"
                    falses.append(
                        (
                            name.split()[0],
                            p,
                            where,
                            f["code"],
                            f["conf"],
                            f["loc"],
                            f["cause"],
                            f["reason"],
                        )
                    )
        per_proj[p] = pp
        rows.append(cells)

    out = [
        (TOTAL_HEADER if low_raw is None else TOTAL_HEADER_LOW)
        + "| ruff ASYNC2xx total | sampled | true | false "
        "| flake8-async ASYNC2xx total | sampled | true | false |",
        "|" + "---|" * 13,
    ]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    out.append(
        "| **total** | {} | {} | {} | {} | | {} | {} | {} | | {} | {} | {} |".format(
            sum(len(d[f"{p}|cob"]["all"]) for p in projects), *tot["cob"], *tot["ruff"], *tot["f8"]
        )
    )
    out += [
        "",
        "Precision (sampled, Wilson 95 %; chain-mismatch counted true):",
        "",
        "| slice | true / sampled | precision [95 % CI] |",
        "|---|---|---|",
    ]
    order = (
        [
            "corevo-obs high",
            "corevo-obs medium",
            "corevo-obs all default",
            "corevo-obs library",
            "corevo-obs tests",
            "corevo-obs examples",
        ]
        + sorted(k for k in slices if " x " in k)
        + ["ruff ASYNC2xx", "flake8-async ASYNC2xx"]
    )
    out.append("| corevo-obs low | 0/0 | n/a (not in default output) |")
    for k in order:
        a, n = slices.get(k, [0, 0])
        out.append(f"| {k} | {a}/{n} | {fmt(a, n)} |")
    out += [
        "",
        "False findings (every one in the samples):",
        "",
        "| tool | project | file:line | code | tier | location | cause class | reason |",
        "|---|---|---|---|---|---|---|---|",
    ]
    out += ["| " + " | ".join(map(str, r)) + " |" for r in falses]
    out += [
        "",
        "Per-project precision of corevo-obs by tier and location (true/sampled, Wilson 95 %):",
        "",
        "| project | high | medium | library | tests | examples |",
        "|---|---|---|---|---|---|",
    ]
    for p in projects:
        q = per_proj[p]
        cells = [
            "-" if q[k][1] == 0 else f"{q[k][0]}/{q[k][1]} {fmt(*q[k])}"
            for k in ("high", "medium", "library", "tests", "examples")
        ]
        out.append(f"| {p} | " + " | ".join(cells) + " |")
    cm = sum(f.get("verdict") == "chain-mismatch" for v in d.values() for f in v["sample"])
    out += ["", f"chain-mismatch verdicts (counted true): {cm}"]
    return "\n".join(out) + "\n"


def report(audit: Path, src: str, low_raw: str | None = None) -> str:
    """Score the audit's samples once: rewrite samples.json with verdicts, write tables.md."""
    with open(audit / "verdicts.json") as fh:
        verdicts: dict[str, list[dict[str, Any]]] = json.load(fh)
    with open(audit / "samples.json") as fh:
        d: Samples = json.load(fh)
    attach(d, verdicts)
    with open(audit / "samples.json", "w") as fh:
        json.dump(d, fh, indent=1)
    text = tables(d, src, low_raw)
    (audit / "tables.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    """Command line: sample or report, see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("sample", help="draw the seeded sample into samples.json")
    sp.add_argument("audit", type=Path, help="the audit directory (holds protocol.md)")
    sp.add_argument("--raw", required=True, help="directory of the raw lint and peer outputs")
    sp.add_argument("--src", required=True, help="directory of the unpacked projects")
    sp.add_argument("--out", type=Path, help="output path (default AUDIT/samples.json)")
    rp = sub.add_parser("report", help="attach verdicts.json and write tables.md")
    rp.add_argument("audit", type=Path, help="the audit directory (samples.json, verdicts.json)")
    rp.add_argument("--src", required=True, help="the prefix of the sampled paths (project dir)")
    rp.add_argument("--low-raw", help="count low findings from DIR/{project}.low.json")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "sample":
            d = sample(protocol_seed(args.audit), args.raw, args.src)
            with open(args.out or args.audit / "samples.json", "w") as fh:
                json.dump(d, fh, indent=1)
        else:
            print(report(args.audit, args.src, args.low_raw), end="")
    except (AuditError, OSError, ValueError, KeyError) as e:
        print(f"lint_audit: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
