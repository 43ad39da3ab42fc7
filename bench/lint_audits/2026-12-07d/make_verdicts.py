"""Write verdicts.json (one verdict per sampled finding, in sample order) from judgements.json.

judgements.json holds one judgement per sampled finding, keyed by (tool, path relative to the
project, line, col), as [tool, path, line, col, verdict, cause, reason]; written before any total
was computed.
"""

import json


def main() -> None:
    """Emit the verdicts in each list's sample order."""
    with open("judgements.json") as fh:
        rows = json.load(fh)
    judged = {(t, p, ln, c): (v, cause, r) for t, p, ln, c, v, cause, r in rows}
    with open("samples.json") as fh:
        d = json.load(fh)
    out = {}
    for key, v in d.items():
        p, tool = key.split("|")
        verdicts = []
        for f in v["sample"]:
            rel = f["path"].replace(f"/tmp/2026-12-07d_src/{p}/", "")
            verdict, cause, reason = judged.pop((tool, rel, f["line"], f["col"]))
            verdicts.append({"verdict": verdict, "cause": cause, "reason": reason})
        if verdicts:
            out[key] = verdicts
    assert not judged, judged
    with open("verdicts.json", "w") as fh:
        json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
