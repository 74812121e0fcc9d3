"""Load ``.tosa`` files through Model Explorer's TOSA adapter and report the graphs it builds, as JSON.

Runs in ``.venv-me`` (``make env`` builds it from ``requirements-me.txt``: ``tosa-adapter-model-explorer`` with
``ai-edge-model-explorer``, whose pins conflict with the main environment), so it imports nothing of tf2tosa::

    .venv-me/bin/python tools/model_explorer_check.py a.tosa b.tosa ...

It calls the adapter the way Model Explorer does, ``TosaFlatbufferAdapter().convert(path, settings)``, and prints
one JSON object: ``{"adapter": version, "files": [...]}`` where each file is ``{"file", "ok", "error", "graphs"}``
and each graph (one per region of the file) is ``{"id", "ops", "inputs", "outputs", "dangling"}``: the op nodes'
labels in node order, whether the GraphInputs/GraphOutputs nodes exist, and the incoming edges whose source node
is not in the graph.  ``tests/test_model_explorer.py`` compares the ops with tf2tosa's own reading of the file.
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import version
from typing import Any

IO_NODES = ("GraphInputs", "GraphOutputs")


def check(path: str) -> dict[str, Any]:
    """The adapter's view of one file (never raises: an adapter failure is ``ok: false`` with its message)."""
    from tosa_adapter_model_explorer.main import TosaFlatbufferAdapter

    try:
        result = TosaFlatbufferAdapter().convert(path, {})
    except Exception as e:  # noqa: BLE001 - reported, the caller decides
        return {"file": path, "ok": False, "error": f"{type(e).__name__}: {e}".splitlines()[0], "graphs": []}
    graphs = []
    for g in result["graphs"]:
        ids = {n.id for n in g.nodes}
        ops = [n.label for n in g.nodes if n.namespace not in IO_NODES]
        dangling = sum(1 for n in g.nodes for e in n.incomingEdges if e.sourceNodeId not in ids)
        graphs.append({"id": g.id, "ops": ops, "nodes": len(g.nodes), "unique_ids": len(ids) == len(g.nodes),
                       "inputs": any(n.namespace == "GraphInputs" for n in g.nodes),
                       "outputs": any(n.namespace == "GraphOutputs" for n in g.nodes), "dangling": dangling})
    return {"file": path, "ok": True, "error": "", "graphs": graphs}


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: model_explorer_check.py FILE.tosa...", file=sys.stderr)
        return 2
    report = {"adapter": version("tosa-adapter-model-explorer"), "files": [check(p) for p in argv]}
    json.dump(report, sys.stdout)
    sys.stdout.write("\n")
    return 0 if all(f["ok"] for f in report["files"]) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
