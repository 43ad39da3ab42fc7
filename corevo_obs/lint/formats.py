"""Output formats: human text (``path:line:col: CODE message``), JSON, and SARIF 2.1.0."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict

from .catalog import Catalog
from .model import Finding

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
DOCS = "docs/lint.md"


def as_text(findings: Sequence[Finding]) -> str:
    return "".join(f"{f.path}:{f.line}:{f.col}: {f.code} {f.message}\n" for f in findings)


def as_json(findings: Sequence[Finding]) -> str:
    rows = [{k: v for k, v in asdict(f).items() if k != "snippet"} for f in findings]
    return json.dumps(rows, indent=2) + "\n"


def as_sarif(findings: Sequence[Finding], catalog: Catalog, version: str) -> str:
    """One SARIF run; every rule of the catalog is described, so each ruleId resolves."""
    codes = sorted(catalog.rules)
    rules = [
        {
            "id": code,
            "name": catalog.rules[code].name,
            "shortDescription": {"text": catalog.rules[code].name.replace("-", " ")},
            "fullDescription": {"text": catalog.rules[code].message},
            "help": {"text": f"Example and fix: {DOCS}, section {code}."},
            "defaultConfiguration": {"level": "error" if code == "COB900" else "warning"},
        }
        for code in codes
    ]
    results = [
        {
            "ruleId": f.code,
            "ruleIndex": codes.index(f.code),
            "level": "error" if f.code == "COB900" else "warning",
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
