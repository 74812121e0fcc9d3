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
        """Write the ``.tosa`` file (and optionally the ``.mlir`` text): both or neither, each atomically.

        Raises :class:`~tf2tosa.errors.OutputError` naming the path when a file cannot be written."""
        from .outputs import write_files

        files: dict[str | os.PathLike[str], bytes] = {path: self.to_bytes()}
        if mlir is not None:
            files[mlir] = self.to_mlir().encode()
        write_files(files)

    # ------------------------------------------------------------------- run
    def run(self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray]) -> dict[str, np.ndarray]:
        """Run the program in the embedded executor."""
        from .executor import run

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
            rounding: str = "double", fold: bool = True, signature: str = "serving_default",
            **extra: Any) -> TosaModel:
    """Convert a model to TOSA 1.0: a ``.tflite`` (path or bytes), a TensorFlow SavedModel directory, a ``.keras`` /
    ``.h5`` file, a frozen GraphDef ``.pb``, a ``keras.Model`` or a ``tf.function`` / ConcreteFunction.

    ``input_shapes`` sets unknown dimensions, e.g. ``{"input": (1, 224, 224, 3)}``.  ``rounding`` is the
    requantization rounding of integer graphs: ``"double"`` (bit-exact with TFLite's reference kernels, needs
    EXT-DOUBLEROUND) or ``"single"`` (PRO-INT only).  ``signature`` picks a SavedModel signature.
    ``keep_variables=["name", …]`` or ``"all"`` (TensorFlow sources) keeps those resource variables as TOSA
    variables (EXT-VARIABLE) that hold their state across invocations instead of freezing them; run several steps
    by passing the same ``variables={}`` dict to :func:`tf2tosa.executor.run`.
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

        options = ConvertOptions(input_shapes=input_shapes, fold=fold, rounding=rounding, extra=dict(extra))
        graph, src = tensorflow_frontend(source, options, signature=signature)
        convert_graph(graph, options, file=src.label)
        return TosaModel(graph, source_path=src.label, tf_source=src)
    data, path = _read_source(source)
    graph = convert_tflite_data(data, path, convert_options(input_shapes=input_shapes, fold=fold,
                                                            rounding=rounding, **extra))
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
    """Read a ``.tosa`` flatbuffer (path or bytes) back into a TosaModel."""
    from .serializer import from_bytes
    from .tosa import profiles

    data, name = _read_source(path)
    graph = from_bytes(data, name=name)
    _validate_loaded(graph, name)
    profs, exts = profiles.requirements(graph)
    graph.meta.update(profiles=profs, extensions=exts, file=name)
    return TosaModel(graph)
