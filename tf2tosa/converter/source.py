"""The ``.tflite`` route of :func:`tf2tosa.convert` below the API layer, so the verify layer can convert without
importing :mod:`tf2tosa.api` (see docs/architecture.md, "Layers")."""

from __future__ import annotations

import mmap
from pathlib import Path

from ..ir import Graph, Value
from ..options import ConvertOptions
from .pipeline import convert_graph
from .tflite import load_tflite


def convert_tflite_data(data: bytes | mmap.mmap, path: str, options: ConvertOptions) -> Graph:
    """Load and convert a ``.tflite`` read from ``path`` (``"<bytes>"`` when it came as bytes)."""
    graph = load_tflite(data, name=Path(path).stem if path != "<bytes>" else None,
                        file=path if path != "<bytes>" else None)
    graph.source.file = path
    convert_graph(graph, options, file=path)
    return graph


def convert_nnef_path(path: str, options: ConvertOptions) -> Graph:
    """Load an NNEF model (directory, ``.tgz`` or ``graph.nnef``) and convert it.

    The standard compound operations that have a rule of their own (``nnef.softmax``, ``nnef.max_pool`` …) stay
    whole (their rules lower them as the TFLite rules do, bit-exact for quantized graphs); every other fragment is
    expanded to primitives by the parser.  The layout pass (:func:`.passes.layout.to_channels_last`) runs before
    legalization; its transpose counts are kept in ``graph.record.layout``."""
    from ..legalizations.registry import get_rule
    from .archive import extract_limit
    from .nnef import COMPOUND_OPS, load_nnef
    from .passes.layout import to_channels_last

    keep = sorted(name for name in COMPOUND_OPS if get_rule(f"nnef.{name}") is not None)
    with extract_limit(options.max_extract_mb):  # (None: the default cap, archive.py)
        graph = load_nnef(path, keep=keep)
    graph.source.file = path
    _check_nnef_quantization(graph, path)
    graph.record.layout = to_channels_last(graph)
    convert_graph(graph, options, file=path)
    return graph


def _check_nnef_quantization(graph: Graph, path: str) -> None:
    """Refuse activations whose ``graph.quant`` entry TOSA's integer profiles cannot carry: a computed tensor must
    be i8, u8 (the unsigned_io pass makes it i8) or i16 (or i32 with zero point 0); one ModelLoadError names the
    first such tensor and the count."""
    from ..errors import ModelLoadError
    from ..ir import DType

    def expressible(v: Value) -> bool:
        q = v.type.quant
        return (q is None or v.dtype in (DType.INT8, DType.UINT8, DType.INT16)
                or (v.dtype is DType.INT32 and not any(q.zero_point)))

    bad = [("external", v) for v in graph.inputs if not expressible(v)]
    bad += [(f"{op.name} ({op.location})", r) for op in graph.topological_order() if op.name != "nnef.const"
            for r in op.results if not expressible(r)]
    if bad:
        where, r = bad[0]
        assert r.type.quant is not None
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise ModelLoadError(f"graph.quant gives tensor '{r.source}' a {r.dtype.value} quantization with zero point "
                             f"{list(r.type.quant.zero_point)[:1]}, which TOSA's integer profiles cannot express "
                             f"for a computed tensor{more}", file=_quant_file(path), op=where, tensor=r.source)


def _quant_file(path: str) -> str:
    """The ``graph.quant`` of an NNEF model as the user knows it (inside the archive, if any)."""
    p = Path(path)
    if p.is_dir():
        return str(p / "graph.quant")
    if p.name.endswith(".nnef"):
        return str(p.parent / "graph.quant")
    return f"{p}:graph.quant"
