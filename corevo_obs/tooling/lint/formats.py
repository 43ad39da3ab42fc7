"""Output formats: human text (``path:line:col: CODE message``), JSON, and SARIF 2.1.0."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict

from .model import Finding
from .rules import RULES, meta

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
DOCS = "docs/lint.md"


def as_text(findings: Sequence[Finding]) -> str:
    return "".join(f"{f.path}:{f.line}:{f.col}: {f.code} {f.message}\n" for f in findings)


def as_json(findings: Sequence[Finding]) -> str:
    rows = [{k: v for k, v in asdict(f).items() if k != "snippet"} for f in findings]
    return json.dumps(rows, indent=2) + "\n"


def as_sarif(findings: Sequence[Finding], version: str) -> str:
    """One SARIF run; every registered rule is described, so each ruleId resolves."""
    codes = sorted(RULES)
    rules = [
        {
            "id": code,
            "name": RULES[code].name,
            "shortDescription": {"text": RULES[code].summary},
            "fullDescription": {"text": RULES[code].message},
            "help": {"text": f"Example and fix: {DOCS}, section {code}."},
            "defaultConfiguration": {"level": "error" if code == meta.PARSE else "warning"},
        }
        for code in codes
    ]
    results = [
        {
            "ruleId": f.code,
            "ruleIndex": codes.index(f.code),
            "level": "error" if f.code == meta.PARSE else "warning",
            "message": {"text": f.message},
            "locations": [{
                "physicalLocation": {
                    "artifactLocation": {"uri": f.path.replace("\\", "/")},
                    "region": {"startLine": f.line, "startColumn": f.col},
                }
            }],
        }
        for f in findings
    ]
    doc = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "corevo-obs lint", "version": version, "rules": rules}},
            "results": results,
        }],
    }
    return json.dumps(doc, indent=2) + "\n"
