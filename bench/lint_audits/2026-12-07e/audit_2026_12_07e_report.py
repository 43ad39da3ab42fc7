"""Attach the verdicts (verdicts.json, fixed before scoring) to samples.json and write tables.md."""

import json
import math
from collections import defaultdict
from typing import Any

SRC = "/tmp/2026-12-07e_src/"
NAMES = {"cob": "corevo-obs", "ruff": "ruff ASYNC2xx", "f8": "flake8-async ASYNC2xx"}


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


def main() -> None:
    """Score the samples once and write the tables."""
    with open("verdicts.json") as fh:
        verdicts: dict[str, list[dict[str, Any]]] = json.load(fh)
    with open("samples.json") as fh:
        d: dict[str, dict[str, list[dict[str, Any]]]] = json.load(fh)
    for key, v in d.items():
        for f, vd in zip(v["sample"], verdicts.get(key, []), strict=True):
            f.update(vd)
    with open("samples.json", "w") as fh:
        json.dump(d, fh, indent=1)

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
        pp: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for tool in ("cob", "ruff", "f8"):
            v = d[f"{p}|{tool}"]
            s = v["sample"]
            t = sum(f["verdict"] != "false" for f in s)
            total = f"{len(v['all'])} ({h}/{m}/0)" if tool == "cob" else str(len(v["all"]))
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
                    where = f["path"].replace(SRC + p + "/", "") + f":{f['line']}"
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
        "| project | corevo total (h/m/l) | sampled | true | false "
        "| ruff ASYNC2xx total | sampled | true | false "
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
    with open("tables.md", "w") as fh:
        fh.write("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
