"""The Python API: convert(), load() and the TosaModel they return."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .errors import InvalidGraphError, ModelLoadError
from .ir import Graph


class TosaModel:
    """A converted TOSA 1.0 program, with the source it came from (for verification)."""

    def __init__(self, graph: Graph, source: bytes | None = None, source_path: str | None = None,
                 tf_source: Any = None) -> None:
        self.graph = graph
        self.source = source
        self.source_path = source_path
        #: the opened TensorFlow model (converter.tensorflow.TFSource) when converted from TensorFlow
        self.tf_source = tf_source

    # ----------------------------------------------------------------- facts
    @property
    def profiles(self) -> list[str]:
        return list(self.graph.meta.get("profiles", []))

    @property
    def extensions(self) -> list[str]:
        return list(self.graph.meta.get("extensions", []))

    @property
    def input_names(self) -> list[str]:
        return [v.name for v in self.graph.inputs]

    @property
    def output_names(self) -> list[str]:
        return [v.name for v in self.graph.outputs]

    @property
    def io_quantization(self) -> dict[str, list[dict[str, Any]]] | None:
        """With ``io="int"``: for each integer model input and output, its ``name``, integer ``dtype``, ``scale`` and
        ``zero_point`` (real = scale × (q − zero_point)) and the ``float_dtype`` of the source's edge; else None."""
        meta = self.graph.meta.get("io_quantization")
        if not meta:
            return None
        named = {"inputs": self.graph.inputs, "outputs": self.graph.outputs}
        return {role: [{"name": named[role][e["index"]].name, **{k: v for k, v in e.items() if k != "index"}}
                       for e in meta.get(role, [])] for role in ("inputs", "outputs")}

    def quantize_inputs(self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray]) -> dict[str, np.ndarray]:
        """Inputs keyed by name, float arrays for an integer model input quantized as TFLite's QUANTIZE kernel does
        (``io="int"``); integer arrays and other inputs pass unchanged."""
        from .converter.passes.integer_io import quantize

        names = self.input_names
        named = dict(inputs) if isinstance(inputs, Mapping) else dict(zip(names, inputs))
        for e in (self.io_quantization or {}).get("inputs", []):
            a = named.get(e["name"])
            if a is not None and np.issubdtype(np.asarray(a).dtype, np.floating):
                named[e["name"]] = quantize(np.asarray(a), e["dtype"], e["scale"], e["zero_point"])
        return named

    def dequantize_outputs(self, outputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The integer model outputs of ``io="int"`` as float, dequantized as TFLite's DEQUANTIZE kernel does."""
        from .converter.passes.integer_io import dequantize

        out = dict(outputs)
        for e in (self.io_quantization or {}).get("outputs", []):
            if e["name"] in out:
                out[e["name"]] = dequantize(out[e["name"]], e["scale"], e["zero_point"])
        return out

    def io_quantization_json(self) -> str | None:
        """The ``.json`` sidecar of an ``io="int"`` model (None otherwise): :attr:`io_quantization` as JSON."""
        import json

        q = self.io_quantization
        return None if q is None else json.dumps({"io_quantization": q}, indent=2, sort_keys=True) + "\n"

    # ---------------------------------------------------------------- output
    def to_bytes(self) -> bytes:
        """The TOSA 1.0 flatbuffer."""
        from .serializer import to_bytes

        return to_bytes(self.graph)

    def to_mlir(self) -> str:
        """TOSA-dialect MLIR text."""
        from .serializer import to_mlir

        return to_mlir(self.graph)

    def save(self, path: str | os.PathLike[str], mlir: str | os.PathLike[str] | None = None) -> None:
        """Write the ``.tosa`` file (and optionally the ``.mlir`` text): both or neither, each atomically.  A model
        converted with ``io="int"`` also gets its sidecar ``<path>.json`` (:meth:`io_quantization_json`).

        Raises :class:`~tf2tosa.errors.OutputError` naming the path when a file cannot be written."""
        from .outputs import write_files

        files: dict[str | os.PathLike[str], bytes] = {path: self.to_bytes()}
        if mlir is not None:
            files[mlir] = self.to_mlir().encode()
        side = self.io_quantization_json()
        if side is not None:
            files[sidecar_path(path)] = side.encode()
        write_files(files)

    # ------------------------------------------------------------------- run
    def run(self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray]) -> dict[str, np.ndarray]:
        """Run the program in the embedded executor.  With ``io="int"``, float data for an integer input is quantized
        on the host first (:meth:`quantize_inputs`); outputs are the program's (integer) tensors."""
        from .executor import run

        if self.io_quantization:
            inputs = self.quantize_inputs(inputs)
        return run(self.graph, inputs)  # type: ignore[arg-type]

    def verify(self, inputs: Sequence[Mapping[str, np.ndarray]] | None = None, *, seed: int = 0, num: int = 1,
               oracle: str | None = None, reference_kernels: bool | None = None, progress: Any = None) -> Any:
        """Compare with the source runtime on ``inputs`` (or ``num`` seeded random inputs); returns a VerifyReport.

        ``oracle``: ``"ref"`` (LiteRT's reference kernels, the default for .tflite sources; integer outputs must
        match them bit for bit, and how far LiteRT's optimized kernels differ is reported in ``report.info``),
        ``"optimized"`` (LiteRT's default kernels) or ``"tensorflow"`` (the default for TensorFlow sources).
        ``reference_kernels`` is the deprecated boolean form of ``oracle="ref"`` / ``"optimized"``.
        """
        from .verify.compare import resolve_oracle, verify_tflite

        if self.tf_source is not None:
            qat = self.graph.meta.get("qat") or {}
            if qat.get("mode") == "int8":
                # an integer QAT graph is checked against TFLite's int8 conversion of the same model, bit for bit
                from .converter.tensorflow import tflite_qat_reference

                chosen = resolve_oracle(oracle, reference_kernels, tensorflow_source=False)
                ref = tflite_qat_reference(self.tf_source, qat.get("io") == "int8")
                return verify_tflite(self, inputs=inputs, seed=seed, num=num, oracle=chosen, tflite=ref,
                                     progress=progress)
            from .errors import InputError
            from .verify.tf_verify import verify_tensorflow

            if resolve_oracle(oracle, reference_kernels, tensorflow_source=True) != "tensorflow":
                raise InputError(f"a float TensorFlow model is verified against TensorFlow, not --oracle {oracle}",
                                 file=self.source_path)
            return verify_tensorflow(self, self.tf_source, inputs, seed=seed, num=num)
        if self.source is None:
            raise ModelLoadError("this model has no source to verify against")
        return verify_tflite(self, inputs=inputs, seed=seed, num=num, oracle=oracle,
                             reference_kernels=reference_kernels, progress=progress)

    def __repr__(self) -> str:
        ops = sum(1 for op in self.graph.ops.values() if op.opcode not in ("CONST", "CONST_SHAPE"))
        return f"<TosaModel {self.graph.name}: {ops} ops, profiles={self.profiles}, extensions={self.extensions}>"


def sidecar_path(path: str | os.PathLike[str]) -> str:
    """Where the ``io="int"`` sidecar of the ``.tosa`` at ``path`` goes: the same name with ``.json``."""
    p = os.fspath(path)
    root, ext = os.path.splitext(p)
    return (root if ext == ".tosa" else p) + ".json"


def atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename, so no half-written file is left.

    Raises :class:`~tf2tosa.errors.OutputError` naming the path when it cannot be written."""
    from .outputs import write_file

    write_file(path, data)


def _read_source(source: str | os.PathLike[str] | bytes) -> tuple[bytes, str]:
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source), "<bytes>"
    path = str(source)
    try:
        with open(path, "rb") as f:
            return f.read(), path
    except OSError as e:
        raise ModelLoadError(f"cannot read model: {e.strerror}", file=path) from None


def convert(source: Any, *, input_shapes: Mapping[str, Sequence[int]] | None = None,
            rounding: str = "double", fold: bool = True, signature: str = "serving_default", io: str = "float",
            **extra: Any) -> TosaModel:
    """Convert a model to TOSA 1.0: a ``.tflite`` (path or bytes), a TensorFlow SavedModel directory, a ``.keras`` /
    ``.h5`` file, a frozen GraphDef ``.pb``, a ``keras.Model`` or a ``tf.function`` / ConcreteFunction.

    ``input_shapes`` sets unknown dimensions, e.g. ``{"input": (1, 224, 224, 3)}``.  ``rounding`` is the
    requantization rounding of integer graphs: ``"double"`` (bit-exact with TFLite's reference kernels, needs
    EXT-DOUBLEROUND) or ``"single"`` (PRO-INT only).  ``signature`` picks a SavedModel signature.
    ``io="int"`` moves the QUANTIZE/DEQUANTIZE at a quantized model's edges to the host: the program then takes and
    returns int8/int16 tensors, and :attr:`TosaModel.io_quantization` gives their scales and zero points.
    """
    from .converter.pipeline import ConvertOptions, convert_graph
    from .converter.source import convert_options, convert_tflite_data
    from .converter.tensorflow import is_tensorflow_source

    if is_tensorflow_source(source):
        import importlib.util

        from .converter.tensorflow import tensorflow_frontend

        if isinstance(source, (str, os.PathLike)) and importlib.util.find_spec("tensorflow") is None:
            from .errors import MissingExtraError

            raise MissingExtraError("TensorFlow models need TensorFlow: pip install 'tf2tosa[tf]'",
                                    file=os.fspath(source))

        options = ConvertOptions(input_shapes=input_shapes, fold=fold, rounding=rounding, io=io, extra=dict(extra))
        graph, src = tensorflow_frontend(source, options, signature=signature)
        convert_graph(graph, options, file=src.label)
        return TosaModel(graph, source_path=src.label, tf_source=src)
    data, path = _read_source(source)
    graph = convert_tflite_data(data, path, convert_options(input_shapes=input_shapes, fold=fold,
                                                            rounding=rounding, io=io, **extra))
    return TosaModel(graph, source=data, source_path=path)


def _validate_loaded(graph: Graph, name: str | None) -> None:
    """Check every op of a read ``.tosa`` (regions included) against the catalogue, as the builder checks the ops it
    creates: a file whose declared shapes or types the spec forbids is refused here, not run."""
    from .tosa import catalogue

    for op in graph.topological_order():
        try:
            catalogue.validate_op(op)
        except InvalidGraphError as e:
            raise InvalidGraphError(e.message, file=name, op=f"{op.opcode}#{op.id}",
                                    tensor=e.tensor or (op.results[0].name if op.results else None)) from None
        for region in op.regions:
            _validate_loaded(region, name)


def load(path: str | os.PathLike[str] | bytes) -> TosaModel:
    """Read a ``.tosa`` flatbuffer (path or bytes) back into a TosaModel; an ``io="int"`` sidecar next to it
    (``model.json``) restores :attr:`TosaModel.io_quantization`."""
    from .serializer import from_bytes
    from .tosa import profiles

    data, name = _read_source(path)
    graph = from_bytes(data, name=name)
    _validate_loaded(graph, name)
    profs, exts = profiles.requirements(graph)
    graph.meta.update(profiles=profs, extensions=exts, file=name)
    if not isinstance(path, (bytes, bytearray, memoryview)) and os.path.isfile(sidecar_path(path)):
        _read_sidecar(graph, sidecar_path(path))
    return TosaModel(graph)


def _read_sidecar(graph: Graph, side: str) -> None:
    """``meta["io_quantization"]`` from the ``io="int"`` sidecar ``side`` (entries matched to the graph by name)."""
    import json

    try:
        with open(side, encoding="utf-8") as f:
            doc = json.load(f)["io_quantization"]
        meta: dict[str, list[dict[str, Any]]] = {}
        for role, values in (("inputs", graph.inputs), ("outputs", graph.outputs)):
            index = {v.name: i for i, v in enumerate(values)}
            meta[role] = [{"index": index[e["name"]], "dtype": str(e["dtype"]), "scale": float(e["scale"]),
                           "zero_point": int(e["zero_point"]), "float_dtype": str(e.get("float_dtype", "fp32"))}
                          for e in doc.get(role, [])]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ModelLoadError(f"unreadable io quantization sidecar ({type(e).__name__}: {e})", file=side) from None
    graph.meta["io_quantization"] = meta
