"""The Python API: convert(), load() and the TosaModel they return."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .errors import InputError, InvalidGraphError, ModelLoadError
from .ir import Graph

#: the runtimes `run` takes: the embedded executor (the oracle) and IREE (compiled from our MLIR)
BACKENDS = ("executor", "iree")


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

    def to_mlir(self, syntax: str = "generic") -> str:
        """TOSA-dialect MLIR text: ``syntax="generic"`` (MLIR's generic operation form, read by tosa-opt and
        IREE alike) or ``"upstream"`` (the custom assembly of today's upstream TOSA dialect, as IREE prints it)."""
        from .serializer import to_mlir

        return to_mlir(self.graph, syntax=syntax)

    def save(self, path: str | os.PathLike[str], mlir: str | os.PathLike[str] | None = None,
             mlir_syntax: str = "generic") -> None:
        """Write the ``.tosa`` file (and optionally the ``.mlir`` text in ``mlir_syntax``, see :meth:`to_mlir`):
        both or neither, each atomically.

        Raises :class:`~tf2tosa.errors.OutputError` naming the path when a file cannot be written."""
        from .outputs import write_files

        files: dict[str | os.PathLike[str], bytes] = {path: self.to_bytes()}
        if mlir is not None:
            files[mlir] = self.to_mlir(mlir_syntax).encode()
        write_files(files)

    # ------------------------------------------------------------------- run
    def run(self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray], backend: str = "executor"
            ) -> dict[str, np.ndarray]:
        """Run the program in the embedded executor, or (``backend="iree"``) compile its MLIR with IREE (cached by
        content) and run that; see :mod:`tf2tosa.verify.iree`."""
        if backend == "iree":
            from .verify import iree

            return iree.run(self.graph, inputs, name=self.source_path or "model")
        if backend != "executor":
            raise InputError(f"unknown backend {backend!r} (choose from {', '.join(BACKENDS)})")
        from .executor import run

        return run(self.graph, inputs)  # type: ignore[arg-type]

    def check_target(self, target: str) -> list[Any]:
        """Everything in the program that ``target`` cannot take (``"ethos-u85"``, ``"ethos-u55"``,
        ``"pro-int-8k"``, ``"pro-fp-8k"``): a list of :class:`tf2tosa.tosa.targets.Problem`, empty when it
        takes the program."""
        from .tosa.targets import TARGETS, check

        if target not in TARGETS:
            raise InputError(f"unknown target {target!r} (choose from {', '.join(TARGETS)})")
        return check(self.graph, target)

    def require_target(self, target: str) -> None:
        """Raise one :class:`~tf2tosa.errors.TargetError` listing everything ``target`` cannot take."""
        from .errors import TargetError

        problems = self.check_target(target)
        if problems:
            raise TargetError(target, problems, file=self.source_path)

    def backend_agreement(self, inputs: Mapping[str, np.ndarray], backend: str = "iree") -> list[dict[str, Any]]:
        """How ``backend`` agrees with the embedded executor (the oracle) on one input set: per output, integers
        bit-exact, floats within 1e-5 × max|executor| or no farther from the float64 result than the executor
        (:func:`tf2tosa.verify.iree.agreement`)."""
        from .executor import run
        from .verify import iree

        theirs = self.run(inputs, backend=backend)
        return iree.agreement(self.graph, run(self.graph, inputs), theirs,  # type: ignore[arg-type]
                              fp64=run(self.graph, inputs, precise=True))  # type: ignore[arg-type]

    def verify(self, inputs: Sequence[Mapping[str, np.ndarray]] | None = None, *, seed: int = 0, num: int = 1,
               oracle: str | None = None, reference_kernels: bool | None = None, progress: Any = None,
               reference: str | os.PathLike[str] | bytes | None = None) -> Any:
        """Compare with the source runtime on ``inputs`` (or ``num`` seeded random inputs); returns a VerifyReport.

        ``oracle``: ``"ref"`` (LiteRT's reference kernels, the default for .tflite sources; integer outputs must
        match them bit for bit, and how far LiteRT's optimized kernels differ is reported in ``report.info``),
        ``"optimized"`` (LiteRT's default kernels) or ``"tensorflow"`` (the default for TensorFlow sources).
        ``reference_kernels`` is the deprecated boolean form of ``oracle="ref"`` / ``"optimized"``.
        An NNEF model is compared with ``reference`` (the ``.tflite`` it was converted from) when given, else with
        the executor's fp64 evaluation of the program.
        """
        from .verify.compare import resolve_oracle, verify_tflite

        if self.graph.meta.get("source_format") == "nnef":
            # NNEF has no runtime among our dependencies: the .tflite it came from when given, else fp64
            if reference is None:
                from .verify.compare import verify_fp64

                return verify_fp64(self, inputs, seed=seed, num=num, progress=progress)
            ref, _ = _read_source(reference)
            return verify_tflite(self, inputs=inputs, seed=seed, num=num, oracle=oracle,
                                 reference_kernels=reference_kernels, tflite=ref, progress=progress)
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
            dims: Mapping[str, int] | None = None, rounding: str = "double", fold: bool = True,
            signature: str = "serving_default", **extra: Any) -> TosaModel:
    """Convert a model to TOSA 1.0: a ``.tflite`` (path or bytes), a TensorFlow SavedModel directory, a ``.keras`` /
    ``.h5`` file, a frozen GraphDef ``.pb``, a ``keras.Model`` or a ``tf.function`` / ConcreteFunction.

    ``input_shapes`` sets unknown dimensions, e.g. ``{"input": (1, 224, 224, 3)}``; ``dims`` sets every unknown
    dimension named by a symbol (``batch``, ``d<k>``: ``tf2tosa inspect`` lists them), e.g. ``{"batch": 4}``.  An
    unknown dimension given neither way takes its default (the size stored in the ``.tflite``, else 1) with a
    warning; ``model.graph.meta["fixed_dims"]`` records each fixed dimension, its size and where it came from.
    ``rounding`` is the requantization rounding of integer graphs: ``"double"`` (bit-exact with TFLite's reference
    kernels, needs EXT-DOUBLEROUND) or ``"single"`` (PRO-INT only).  ``signature`` picks a SavedModel signature.
    """
    from .converter.nnef import is_nnef_source
    from .converter.pipeline import ConvertOptions, convert_graph
    from .converter.source import convert_options, convert_tflite_data
    from .converter.tensorflow import is_tensorflow_source

    if is_nnef_source(source):
        from .converter.source import convert_nnef_path

        path = os.fspath(source)
        graph = convert_nnef_path(path, convert_options(input_shapes=input_shapes, dims=dims, fold=fold,
                                                        rounding=rounding,
                                                        **extra))
        return TosaModel(graph, source_path=path)
    if is_tensorflow_source(source):
        import importlib.util

        from .converter.tensorflow import tensorflow_frontend

        if isinstance(source, (str, os.PathLike)) and importlib.util.find_spec("tensorflow") is None:
            from .errors import MissingExtraError

            raise MissingExtraError("TensorFlow models need TensorFlow: pip install 'tf2tosa[tf]'",
                                    file=os.fspath(source))

        options = ConvertOptions(input_shapes=input_shapes, dims=dims, fold=fold, rounding=rounding,
                                 extra=dict(extra))
        graph, src = tensorflow_frontend(source, options, signature=signature)
        convert_graph(graph, options, file=src.label)
        return TosaModel(graph, source_path=src.label, tf_source=src)
    data, path = _read_source(source)
    graph = convert_tflite_data(data, path, convert_options(input_shapes=input_shapes, dims=dims, fold=fold,
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


def _mlir_to_tosa(path: str | os.PathLike[str]) -> tuple[bytes, str]:
    """The ``.tosa`` bytes of TOSA-dialect MLIR text, serialized by Arm's ``tosa-opt --tosa-serialize``.

    The generic syntax (what ``--mlir`` writes by default) and tosa-opt's own syntax are read directly; text in
    upstream's keyword syntax is first re-printed in the generic form by IREE's ``iree-opt`` when IREE is there."""
    import subprocess

    from .errors import MissingExtraError
    from .verify import tosa_tools

    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ModelLoadError(f"cannot read MLIR text: {getattr(e, 'strerror', None) or e}", file=name) from None
    if not tosa_tools.available():
        raise MissingExtraError("reading MLIR needs tosa-opt (the tosa-tools environment .venv-tosa: "
                                "make .venv-tosa)", file=name)
    try:
        return tosa_tools.serialize_mlir(text), name
    except tosa_tools.ToolError as first:
        from .verify import iree

        if iree.available():
            from iree.compiler.tools.binaries import find_tool

            proc = subprocess.run([find_tool("iree-opt"), "--mlir-print-op-generic", "-"], input=text, text=True,
                                  capture_output=True, check=False)
            if proc.returncode == 0:
                try:
                    return tosa_tools.serialize_mlir(proc.stdout), name
                except tosa_tools.ToolError:
                    pass
        lines = [ln.strip() for ln in str(first).splitlines() if "error:" in ln]
        raise ModelLoadError(f"not TOSA-dialect MLIR that tosa-opt can read: {lines[0] if lines else first}",
                             file=name) from None


def load(path: str | os.PathLike[str] | bytes) -> TosaModel:
    """Read a ``.tosa`` flatbuffer (path or bytes) back into a TosaModel; a ``.mlir`` path is TOSA-dialect MLIR
    text, serialized to a flatbuffer by Arm's ``tosa-opt`` first (needs the tosa-tools environment)."""
    from .serializer import from_bytes
    from .tosa import profiles

    if isinstance(path, str | os.PathLike) and os.fspath(path).endswith(".mlir"):
        data, name = _mlir_to_tosa(path)
    else:
        data, name = _read_source(path)
    graph = from_bytes(data, name=name)
    _validate_loaded(graph, name)
    profs, exts = profiles.requirements(graph)
    graph.meta.update(profiles=profs, extensions=exts, file=name)
    return TosaModel(graph)
