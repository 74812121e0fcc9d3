"""State as inputs and outputs (``--state-io``): EXT-VARIABLE variables become graph inputs and outputs.

before: a TOSA graph that keeps state in EXT-VARIABLE variables: ``VARIABLE`` declarations (with an optional initial
value), ``VARIABLE_READ``s and at most one ``VARIABLE_WRITE`` per variable (what the legalization of TFLite resource
variables emits);
after: no variable op; per variable ``V`` (in declaration order) an extra graph input ``V_state_in`` (the state before
the invocation: every ``VARIABLE_READ`` of ``V`` is replaced by it) and an extra graph output ``V_state_out`` (the
value the ``VARIABLE_WRITE`` stored, or the input itself through an ``IDENTITY`` when nothing writes ``V``), after the
model's own inputs and outputs.  ``graph.record.state_io`` records the pairs with each variable's type and initial
value (the host's state before the first invocation).

A single-shot runtime, or an NPU compiler without EXT-VARIABLE (Vela turns VARIABLE ops into identities), can then
stream the model: the host carries the state from ``V_state_out`` of one invocation to ``V_state_in`` of the next.

Why this is the same program: within one invocation the legalization keeps reads before the write (a read after the
write takes the written value directly, spec 2.17 / the stateful-ops RFC), so every ``VARIABLE_READ`` sees the
state of the previous invocation (the initial value on the first), which is exactly what ``V_state_in`` holds.  The
graph loses EXT-VARIABLE (and nothing else).

Records (:mod:`tf2tosa.ir.records`): writes ``graph.record.state_io``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import InvalidGraphError
from ...ir import Graph, TensorType, Value
from ...ir.types import DType


def _nested_variable_op(graph: Graph) -> str | None:
    for op in graph.ops.values():
        for region in op.regions:
            for inner in region.ops.values():
                if inner.opcode in ("VARIABLE", "VARIABLE_READ", "VARIABLE_WRITE"):
                    return f"{inner.opcode} inside a {op.opcode} region"
            found = _nested_variable_op(region)
            if found:
                return found
    return None


def state_io(graph: Graph, file: str | None = None) -> list[dict[str, Any]]:
    """Rewrite every variable of ``graph`` into a state input/output pair; returns the pairs (also in
    ``graph.record.state_io``)."""
    # the executor's session names the pairs; imported here so a conversion without --state-io loads no executor
    from ...executor.session import STATE_IN_SUFFIX, STATE_OUT_SUFFIX

    nested = _nested_variable_op(graph)
    if nested:
        raise InvalidGraphError(f"--state-io: {nested} (only top-level variables can become inputs/outputs)",
                                file=file)
    decls = sorted((op for op in graph.ops.values() if op.opcode == "VARIABLE"), key=lambda o: o.id)
    pairs: list[dict[str, Any]] = []
    for decl in decls:
        name = str(decl.attrs.get("name", decl.attrs.get("uid")))
        reads = sorted((op for op in graph.ops.values()
                        if op.opcode == "VARIABLE_READ" and str(op.attrs.get("name")) == name), key=lambda o: o.id)
        writes = sorted((op for op in graph.ops.values()
                         if op.opcode == "VARIABLE_WRITE" and str(op.attrs.get("name")) == name), key=lambda o: o.id)
        if len(writes) > 1:
            raise InvalidGraphError(f"--state-io: variable {name} is written {len(writes)} times in one invocation",
                                    file=file, tensor=name)
        dt = decl.attrs.get("type")
        shape = tuple(int(d) for d in np.asarray(decl.attrs.get("var_shape", ())).reshape(-1))
        vtype = reads[0].result.type if reads else (writes[0].operands[0].type if writes else
                                                    TensorType(shape, dt if isinstance(dt, DType) else DType.FP32))
        want_in, want_out = name + STATE_IN_SUFFIX, name + STATE_OUT_SUFFIX
        if want_in in graph._names or want_out in graph._names:
            raise InvalidGraphError(f"--state-io: the graph already has a value named {want_in} or {want_out}",
                                    file=file, tensor=name)
        state_in = graph.add_input(want_in, vtype)
        for r in reads:
            graph.replace_all_uses(r.result, state_in)
            graph.remove_op(r)
        nxt: Value
        if writes:
            nxt = writes[0].operands[0]
            graph.remove_op(writes[0])
        else:
            nxt = state_in
        if nxt.producer is None or nxt in graph.outputs or nxt.is_const:
            op = graph.add_op("tosa.IDENTITY", [nxt], [nxt.type], {}, [want_out], location=f"state {name}")
            nxt = op.result
        else:
            graph._names.discard(nxt.name)
            nxt.name = graph.unique_name(want_out)
        graph.outputs = [*graph.outputs, nxt]
        graph.remove_op(decl)
        init = decl.attrs.get("initial_value")
        pairs.append({"variable": name, "input": state_in.name, "output": nxt.name, "type": str(vtype),
                      "initial": None if init is None else np.asarray(init)})
    graph.record.state_io = pairs
    return pairs


__all__ = ["state_io"]
