"""Sample findings per project and tool by the frozen protocol (seed in protocol.md)."""
import json, os, random, re, sys
from collections import Counter

SEED = 1721729001
RAW = "/tmp/2026-12-07c_raw"
SRC = "/tmp/2026-12-07c_src"


def loc(path: str) -> str:
    parts = path.split("/")
    name = parts[-1]
    if any(p in ("test", "tests", "testing") for p in parts[:-1]) or name.startswith("test_") or name == "conftest.py":
        return "tests"
    if any(p.startswith("example") or p in ("docs", "samples", "contrib") for p in parts[:-1]):
        return "examples"
    return "library"


def key(f):
    return (f["path"], f["line"], f["col"], f["code"], f["msg"])


out, counts = {}, {}
for p in sorted(d for d in os.listdir(SRC) if os.path.isdir(os.path.join(SRC, d))):
    cob = [dict(tool="cob", path=f["path"], line=f["line"], col=f["col"], code=f["code"], msg=f["message"],
                conf=f["confidence"], loc=loc(f["path"].replace(SRC + "/" + p + "/", "")))
           for f in json.load(open(f"{RAW}/{p}.cob1.json"))]
    ruff_all = [dict(tool="ruff", path=f["filename"], line=f["location"]["row"], col=f["location"]["column"],
                     code=f["code"], msg=f["message"], conf="-", loc=loc(f["filename"].replace(SRC + "/" + p + "/", "")))
                for f in json.load(open(f"{RAW}/{p}.ruff.json"))]
    f8_all = []
    for line in open(f"{RAW}/{p}.f8.txt"):
        path, row, col, code, text = line.rstrip("\n").split("|", 4)
        f8_all.append(dict(tool="f8", path=path.replace("//", "/"), line=int(row), col=int(col), code=code, msg=text,
                           conf="-", loc=loc(path.replace("//", "/").replace(SRC + "/" + p + "/", ""))))
    counts[p] = {"ruff_codes": Counter(f["code"] for f in ruff_all), "f8_codes": Counter(f["code"] for f in f8_all),
                 "cob_conf": Counter(f["conf"] for f in cob)}
    blocking = lambda fs: [f for f in fs if re.fullmatch(r"ASYNC2\d\d", f["code"])]
    for tool, fs in (("cob", cob), ("ruff", blocking(ruff_all)), ("f8", blocking(f8_all))):
        fs = sorted(fs, key=key)
        out[f"{p}|{tool}"] = {"all": fs, "sample": random.Random(SEED).sample(fs, min(15, len(fs)))}

json.dump(out, open(sys.argv[1], "w"), indent=1)
for p, c in counts.items():
    print(p, dict(c["cob_conf"]), "ruff", dict(c["ruff_codes"]), "f8", dict(c["f8_codes"]))
