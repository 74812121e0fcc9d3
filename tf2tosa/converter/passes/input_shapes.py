"""Static input shapes.

before: a frontend graph whose inputs may have unknown dimensions; after: every input has a static shape (from
``input_shapes``, or 1 for an unknown batch dimension, with a warning).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from ...errors import InputError
from ...ir import Graph

log = logging.getLogger("tf2tosa")


def resolve_input_shapes(graph: Graph, input_shapes: Mapping[str, Sequence[int]] | None = None,
                         file: str | None = None) -> list[str]:
    """Give every graph input a static shape.

    ``input_shapes`` maps an input name (the IR name or the source tensor name) to a shape.  Unknown
    dims left unset: dim 0 (batch) defaults to 1 with a warning; any other unknown dim is an error.
    Returns the warnings issued.
    """
    shapes = dict(input_shapes or {})
    by_name = {v.name: v for v in graph.inputs}
    by_name.update({v.source: v for v in graph.inputs if v.source})
    for name in shapes:
        if name not in by_name:
            valid = ", ".join(v.name for v in graph.inputs)
            raise InputError(f"no model input named {name!r} (inputs: {valid})", file=file, tensor=name)
    warnings: list[str] = []
    stored = graph.meta.get("stored_shapes", {})
    for v in graph.inputs:
        want = shapes.get(v.name, shapes.get(v.source or "", None))
        if want is not None:
            want = tuple(int(d) for d in want)
            if len(want) != v.type.rank:
                raise InputError(f"input {v.name!r} has rank {v.type.rank} (shape {list(v.shape)}), "
                                 f"got shape {list(want)}", file=file, tensor=v.name)
            for have, new in zip(v.shape, want):
                if new < 1 or (isinstance(have, int) and have >= 0 and have != new):
                    raise InputError(f"input {v.name!r} has shape {list(v.shape)}, got {list(want)}",
                                     file=file, tensor=v.name)
            v.type = v.type.with_shape(want)
            continue
        if v.type.is_static:
            continue
        dims = []
        for i, d in enumerate(v.shape):
            if isinstance(d, int) and d >= 0:
                dims.append(d)
            elif i == 0:
                dims.append(1)
                msg = f"input {v.name!r}: batch dimension unset, using 1 (set it with --input-shape)"
                warnings.append(msg)
                log.warning(msg)
            else:
                hint = stored.get(v.name)
                if hint and isinstance(hint[i], int) and hint[i] > 0:
                    dims.append(hint[i])
                else:
                    raise InputError(f"input {v.name!r} has unknown dimension {i} (shape {list(v.shape)}); "
                                     f"set it with --input-shape {v.name}=…", file=file, tensor=v.name)
        v.type = v.type.with_shape(tuple(dims))
    return warnings
