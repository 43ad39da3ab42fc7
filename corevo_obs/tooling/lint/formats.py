"""Output formats: human text (``path:line:col: CODE message [confidence]``), JSON,
SARIF 2.1.0 and GitHub workflow annotations."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict

from .model import Finding
from .rules import RULES, meta

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
DOCS = "docs/lint.md"


# SARIF ``rank`` (0-100, how likely a result is a real problem) of each confidence
RANK = {"high": 90.0, "medium": 60.0, "low": 30.0}


def _tail(f: Finding) -> str:
    """What follows the message: the confidence, and an observed stall the fact came from."""
    seen = f"; {f.source}" if f.source else ""
    return f" [{f.confidence}{seen}]" if f.code != meta.PARSE else ""


def as_text(findings: Sequence[Finding]) -> str:
    return "".join(f"{f.path}:{f.line}:{f.col}: {f.code} {f.message}{_tail(f)}\n"
                   for f in findings)


def _escape(text: str, prop: bool = False) -> str:
    """GitHub's workflow-command escaping (properties also escape ``:`` and ``,``)."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def as_github(findings: Sequence[Finding]) -> str:
    """``::error file=...,line=...,col=...,title=CODE::message`` lines for a workflow log."""
    return "".join(
        f"::error file={_escape(f.path, True)},line={f.line},col={f.col},"
        f"title={_escape(f.code, True)}::{_escape(f'{f.code} {f.message}{_tail(f)}')}\n"
        for f in findings)


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
            "rank": RANK.get(f.confidence, -1.0),
            "properties": {"confidence": f.confidence, "via": list(f.via),
                           **({"observed": f.source} if f.source else {})},
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
