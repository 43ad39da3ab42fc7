"""Run by a *newer* interpreter (``python3.13 -I _astjson.py NAME < source``): parse the
source and print its AST as JSON, so a lint running on an older Python can analyse code
written for a newer grammar. Standard library only; valid on every supported Python."""

import ast
import json
import sys


def convert(node: object) -> object:
    if isinstance(node, ast.AST):
        out: dict[str, object] = {"_t": type(node).__name__,
               "_k": "stmt" if isinstance(node, ast.stmt) else
                     "expr" if isinstance(node, ast.expr) else "other"}
        for name in node._fields:
            out[name] = convert(getattr(node, name, None))
        for name in node._attributes:
            if hasattr(node, name):
                out[name] = getattr(node, name)
        return out
    if isinstance(node, list):
        return [convert(item) for item in node]
    if isinstance(node, bytes):
        return {"_bytes": node.hex()}
    if isinstance(node, complex):
        return {"_complex": [node.real, node.imag]}
    if node is Ellipsis:
        return {"_ellipsis": True}
    return node


def main() -> None:
    source = sys.stdin.buffer.read()
    try:
        tree = ast.parse(source, filename=sys.argv[1])
    except (SyntaxError, ValueError) as exc:
        print(json.dumps({"error": getattr(exc, "msg", None) or str(exc),
                          "version": list(sys.version_info[:2])}))
        return
    print(json.dumps({"tree": convert(tree), "version": list(sys.version_info[:2])}))


if __name__ == "__main__":
    main()
