"""Count the free-form ``graph.meta`` keys of the package and the places that use them.

    PYTHONPATH=CHECKOUT .venv/bin/python tools/meta_keys.py [PACKAGE_DIR] [-v]

A *use* is one read or write of the dict in code (docstrings and comments are not read): ``X.meta[...]``,
``X.meta.get/pop/setdefault/update(...)``, ``"k" in X.meta``, or the same through a name bound to ``X.meta``
(``meta = g.meta``) or a parameter named ``meta`` holding it.  A *key* is a string constant (or a module constant
naming one) a use spells.  Attributes named ``meta`` that are not a graph's (``self.meta`` of ``converter.qat``'s
tracker, ``info.meta`` of the zoo cache, ``zoo``'s run record) are left out.  ``-v`` lists every key with its count.
"""

from __future__ import annotations

import ast
import os
import sys
from collections import Counter

#: (file suffix, base expression) pairs of ``.meta`` attributes that are not a graph's metadata
NOT_GRAPH = {("converter/qat.py", "self"), ("zoo.py", "info")}
#: files whose local ``meta`` names are not a graph's (zoo's run record, report renderers, sparse levels)
NOT_GRAPH_NAMES = ("zoo.py", "verify/report.py", "legalizations/tfl_sparse.py", "converter/tensorflow.py",
                   "api.py")


def _consts(trees: dict[str, ast.Module]) -> dict[str, str]:
    out: dict[str, str] = {}
    for tree in trees.values():
        for node in tree.body:
            if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                    and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
                out[node.targets[0].id] = node.value.value
    return out


def _is_meta(node: ast.AST, path: str) -> bool:
    if isinstance(node, ast.Attribute) and node.attr == "meta":
        base = ast.unparse(node.value)
        return not any(path.endswith(f) and base == b for f, b in NOT_GRAPH)
    if isinstance(node, ast.Name) and node.id == "meta":
        return not path.endswith(NOT_GRAPH_NAMES)
    return False


def scan(root: str) -> tuple[Counter[str], int, set[str]]:
    trees: dict[str, ast.Module] = {}
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(".py"):
                p = os.path.join(d, f)
                with open(p, encoding="utf-8") as fh:
                    trees[p] = ast.parse(fh.read(), p)
    consts = _consts(trees)

    def key(node: ast.AST | None) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name) and node.id in consts:
            return consts[node.id]
        if isinstance(node, ast.Attribute) and node.attr in consts:
            return consts[node.attr]
        return None

    keys: Counter[str] = Counter()
    uses, files = 0, set()
    for path, tree in trees.items():
        for node in ast.walk(tree):
            found: list[str | None] = []
            if isinstance(node, ast.Subscript) and _is_meta(node.value, path):
                found = [key(node.slice)]
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and _is_meta(node.func.value, path)):
                if node.func.attr == "update":
                    found = [kw.arg for kw in node.keywords]
                elif node.func.attr in ("get", "pop", "setdefault"):
                    found = [key(node.args[0]) if node.args else None]
            elif (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn))
                  and _is_meta(node.comparators[0], path)):
                found = [key(node.left)]
            if found:
                uses += 1
                files.add(path)
                keys.update(k for k in found if k is not None)
    return keys, uses, files


def main(argv: list[str]) -> int:
    args = [a for a in argv if a != "-v"]
    root = args[0] if args else os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tf2tosa")
    keys, uses, files = scan(root)
    print(f"{len(keys)} keys, {uses} uses in {len(files)} files")
    if "-v" in argv:
        for k, n in sorted(keys.items()):
            print(f"  {k} {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
