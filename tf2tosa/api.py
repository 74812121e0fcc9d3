"""The Python API: convert(), load() and the TosaModel they return."""

from __future__ import annotations

import mmap
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .errors import InputError, InvalidGraphError, ModelLoadError
from .ir import Graph
from .options import ConvertOptions, check_keywords

#: the runtimes `run` takes: the embedded executor (the oracle), IREE (compiled from our MLIR) and a Vulkan device
#: through Arm's ML SDK for Vulkan (our .tosa converted to a VGF)
BACKENDS = ("executor", "iree", "vgf")


class TosaModel:
    """A converted TOSA 1.0 program, with the source it came from (for verification)."""

    def __init__(self, graph: Graph, source: bytes | mmap.mmap | None = None, source_path: str | None = None,
                 tf_source: Any = None) -> None:
        self.graph = graph
        #: the source ``.tflite``: its bytes, or the read-only map of the file that the constants are views of
        self._source = source
        self.source_path = source_path
        #: the opened TensorFlow model (converter.tensorflow.TFSource) when converted from TensorFlow
        self.tf_source = tf_source

    @property
    def source(self) -> bytes | None:
        """The source ``.tflite``'s bytes (read from the file's map when first asked for)."""
        if isinstance(self._source, mmap.mmap):
            self._source = bytes(self._source)
        return self._source

    @source.setter
    def source(self, data: bytes | None) -> None:
        self._source = data

    # ----------------------------------------------------------------- facts
    @property
    def profiles(self) -> list[str]:
        return list(self.graph.record.profiles or [])

    @property
    def extensions(self) -> list[str]:
        return list(self.graph.record.extensions or [])

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
        meta = self.graph.record.io_quantization
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
        q = self.io_quantization
        if q is None:
            return None
        import json

        return json.dumps({"io_quantization": q}, indent=2, sort_keys=True) + "\n"

    # ---------------------------------------------------------------- output
    def to_bytes(self) -> bytes:
        """The TOSA 1.0 flatbuffer."""
        from .serializer import to_bytes

        return to_bytes(self.graph)

    @property
    def is_dynamic(self) -> bool:
        """Whether this is a symbolic TOSA 1.1-draft program (:func:`convert_dynamic`)."""
        from .tosa.optable import DRAFT_VERSION

        return self.graph.record.specification_version == DRAFT_VERSION

    def to_mlir(self, syntax: str = "generic") -> str:
        """TOSA-dialect MLIR text: ``syntax="generic"`` (MLIR's generic operation form, read by tosa-opt and
        IREE alike) or ``"upstream"`` (the custom assembly of today's upstream TOSA dialect, as IREE prints it).

        A symbolic program (:attr:`is_dynamic`) is declared ``specification_version = "1.1.draft"``, level none,
        with the profiles and extensions it needs (EXT-SHAPE, EXT-DYNAMIC), and carries its size guards and sample
        sizes (``graph.dims.guards``, ``graph.dims.hints``) as the module attributes ``tf2tosa.dim_guards`` and
        ``tf2tosa.dim_hints``, which :func:`load` reads back."""
        from .serializer import to_mlir

        if self.is_dynamic:
            from .tosa.optable import DRAFT_VERSION
            from .tosa.profiles import requirements

            profs, exts = requirements(self.graph)
            exts = sorted(set(exts) | {"EXT-SHAPE", "EXT-DYNAMIC"})
            return to_mlir(self.graph, profs, exts, level="none", syntax=syntax, version=DRAFT_VERSION,
                           dim_guards=self.graph.dims.guards or (), dim_hints=self.graph.dims.hints)
        return to_mlir(self.graph, syntax=syntax)

    def to_vgf(self) -> bytes:
        """The VGF (Vulkan Graph Format) that Arm's model converter makes of the ``.tosa`` (cached by content; needs
        the ML SDK for Vulkan, see :mod:`tf2tosa.verify.vgf`).  Raises :class:`~tf2tosa.verify.vgf.VgfError` when
        the SDK is missing or the converter refuses the program."""
        from .verify import vgf

        if self.is_dynamic:
            raise InputError("a VGF is made of a static program: this one is symbolic (--dynamic)",
                             file=self.source_path)
        return vgf.to_vgf(self.graph, name=self.source_path or "model")

    def save(self, path: str | os.PathLike[str], mlir: str | os.PathLike[str] | None = None,
             mlir_syntax: str = "generic", vgf: str | os.PathLike[str] | None = None) -> None:
        """Write the ``.tosa`` file (and optionally the ``.mlir`` text in ``mlir_syntax``, see :meth:`to_mlir`, and
        the ``vgf`` that Arm's model converter makes of it, see :meth:`to_vgf`): all or none, each atomically; the
        VGF is made before anything is written, so a program the converter refuses leaves no file.  A model
        converted with ``io="int"`` also gets its sidecar ``<path>.json`` (:meth:`io_quantization_json`).

        Raises :class:`~tf2tosa.errors.OutputError` naming the path when a file cannot be written, or (before
        anything is written) when a path is the model's source file or another of the paths given
        (:func:`tf2tosa.outputs.check_paths`)."""
        from .outputs import Content, check_paths, write_files
        from .serializer.tosa_writer import write_file

        side_path = sidecar_path(path) if self.io_quantization else None
        check_paths(self._source_files(), [("the output", path), ("the mlir output", mlir),
                                           ("the .json sidecar", side_path), ("the vgf output", vgf)])
        vgf_bytes = self.to_vgf() if vgf is not None else None

        if self.is_dynamic and os.fspath(path).endswith(".mlir"):  # a 1.1-draft program as MLIR text only
            texts: dict[str | os.PathLike[str], Content] = {path: self.to_mlir(mlir_syntax).encode()}
            if mlir is not None:
                texts[mlir] = texts[path]
            write_files(texts)
            return
        # built in a file map: the whole flatbuffer is never in memory
        files: dict[str | os.PathLike[str], Content] = {path: lambda tmp: write_file(self.graph, tmp)}
        if mlir is not None:
            files[mlir] = self.to_mlir(mlir_syntax).encode()
        if vgf is not None and vgf_bytes is not None:
            files[vgf] = vgf_bytes
        side = self.io_quantization_json()
        if side is not None:
            files[sidecar_path(path)] = side.encode()
        write_files(files)

    def _source_files(self) -> list[tuple[str, str]]:
        """The files this model was read from (its source model, the ``.tosa`` it was loaded from), that exist."""
        names = {self.source_path, self.graph.source.file}
        return [("the input model", n) for n in sorted(x for x in names if isinstance(x, str) and os.path.exists(x))]

    # ------------------------------------------------------------------- run
    def run(self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray], backend: str = "executor",
            check_guards: bool = True) -> dict[str, np.ndarray]:
        """Run the program in the embedded executor, or (``backend="iree"``) compile its MLIR with IREE (cached by
        content) and run that (:mod:`tf2tosa.verify.iree`), or (``backend="vgf"``) convert it to a VGF with Arm's
        model converter (cached by content) and run that on a Vulkan device (:mod:`tf2tosa.verify.vgf`).  With
        ``io="int"``, float data for an integer input is quantized on the host first (:meth:`quantize_inputs`);
        outputs are the program's (integer) tensors.
        A symbolic program run where a size guard of its conversion does not hold logs one warning per guard
        (:meth:`guard_warnings`; ``check_guards=False`` for callers that report them themselves)."""
        if self.io_quantization:
            inputs = self.quantize_inputs(inputs)
        if backend == "iree":
            from .verify import iree

            return iree.run(self.graph, inputs, name=self.source_path or "model")
        if backend == "vgf":
            from .verify import vgf

            return vgf.run(self.graph, inputs, name=self.source_path or "model")
        if backend != "executor":
            raise InputError(f"unknown backend {backend!r} (choose from {', '.join(BACKENDS)})")
        if self.is_dynamic and check_guards:
            import logging

            for w in self.guard_warnings(inputs):
                logging.getLogger("tf2tosa").warning("%s", w)
        from .executor import run
        from .executor.registry import ExecutionError

        try:
            return run(self.graph, inputs)  # type: ignore[arg-type]
        except ExecutionError as e:  # a symbolic program at sizes it forbids: say which relation failed
            if not self.is_dynamic or "ASSERT_EQUAL_SHAPE" not in f"{e.op} {e.message}":
                raise
            from .converter.dynamic import equality_violations

            why = equality_violations(self.graph.dims, self._input_shapes(inputs))
            if not why:
                raise
            raise type(e)(f"ASSERT_EQUAL_SHAPE: {why[0]}", op=e.op, tensor=e.tensor, file=e.file) from None

    def _input_shapes(self, inputs: Mapping[str, Any] | Sequence[Any]) -> dict[str, tuple[int, ...]]:
        if isinstance(inputs, Mapping):
            return {k: tuple(np.shape(v)) if not isinstance(v, tuple) else v for k, v in inputs.items()}
        return {v.name: tuple(np.shape(x)) for v, x in zip(self.graph.inputs, inputs)}

    def guard_warnings(self, inputs: Mapping[str, Any] | Sequence[Any]) -> list[str]:
        """One warning per size guard of a symbolic program (``graph.dims.guards``: the size comparisons its
        conversion made at the sample sizes) that does not hold for these inputs (arrays, or shapes by input
        name): the conversion check did not cover those sizes.  Not an error: many guards only choose between two
        equivalent forms.  Empty for a static program or one read from a ``.tosa`` (which cannot carry guards)."""
        from .converter.dynamic import guard_warning_lines

        return guard_warning_lines(self.graph.dims, self._input_shapes(inputs))

    def check_target(self, target: str) -> list[Any]:
        """Everything in the program that ``target`` cannot take (``"ethos-u85"``, ``"ethos-u55"``,
        ``"pro-int-8k"``, ``"pro-fp-8k"``, ``"vulkan-ml"``): a list of :class:`tf2tosa.tosa.targets.Problem`, empty
        when it takes the program."""
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
        (:func:`tf2tosa.verify.iree.agreement`, also for ``backend="vgf"``)."""
        from .executor import run
        from .verify import iree, vgf

        inputs = self.quantize_inputs(inputs)  # both sides get the same (integer) data, as run() gives the backend
        theirs = self.run(inputs, backend=backend)
        agreement = vgf.agreement if backend == "vgf" else iree.agreement
        return agreement(self.graph, run(self.graph, inputs), theirs,  # type: ignore[arg-type]
                         fp64=run(self.graph, inputs, precise=True))  # type: ignore[arg-type]

    def session(self) -> Any:
        """A new streaming :class:`~tf2tosa.executor.session.Session`: ``run(inputs)`` is one invocation and keeps
        the variables' state for the next (EXT-VARIABLE, or the state inputs/outputs of a ``state_io=True``
        conversion); ``reset()`` goes back to the initial state; ``state`` reads or sets it by variable name.
        Sessions are independent of each other."""
        from .executor.session import Session

        return Session(self.graph, file=self.source_path or self.graph.source.file)

    @property
    def state_variables(self) -> list[Any]:
        """The program's state (:class:`~tf2tosa.executor.session.StateVariable`: name, type, initial value and,
        in the state-as-I/O form, the input/output pair), in declaration order."""
        from .executor.session import state_variables

        return state_variables(self.graph)

    def verify_steps(self, steps: int, frames: Mapping[str, np.ndarray] | None = None, *, seed: int = 0,
                     oracle: str | None = None, state: Mapping[str, np.ndarray] | None = None,
                     progress: Any = None, trust_model: bool = False) -> Any:
        """Run ``steps`` consecutive invocations in a session and in LiteRT's interpreter (one interpreter invoked
        ``steps`` times on the same inputs) and compare every step; returns a VerifyReport with ``steps`` set.

        ``frames`` (input name -> array whose leading axis is the step) gives inputs; other inputs are seeded
        random, one set per step.  ``state`` sets the initial state of the session (only where the source's own
        initial value is not known: a state-as-I/O ``.tosa``).  A TensorFlow source that touches the file system,
        calls Python or uses queues is not run unless ``trust_model`` (see :meth:`verify`)."""
        from .verify.stream import verify_stream

        if self.tf_source is not None:
            from .verify.tf_verify import check_trusted

            check_trusted(self.tf_source, trust_model)

        return verify_stream(self, steps, frames, seed=seed, oracle=oracle, state=state, progress=progress)

    def verify(self, inputs: Sequence[Mapping[str, np.ndarray]] | None = None, *, seed: int = 0, num: int = 1,
               oracle: str | None = None, reference_kernels: bool | None = None, progress: Any = None,
               reference: str | os.PathLike[str] | bytes | None = None, trust_model: bool = False) -> Any:
        """Compare with the source runtime on ``inputs`` (or ``num`` seeded random inputs); returns a VerifyReport.

        ``oracle``: ``"ref"`` (LiteRT's reference kernels, the default for .tflite sources; integer outputs must
        match them bit for bit, and how far LiteRT's optimized kernels differ is reported in ``report.info``),
        ``"optimized"`` (LiteRT's default kernels) or ``"tensorflow"`` (the default for TensorFlow sources).
        ``reference_kernels`` is the deprecated boolean form of ``oracle="ref"`` / ``"optimized"``.
        An NNEF model is compared with ``reference`` (the ``.tflite`` it was converted from) when given, else with
        the executor's fp64 evaluation of the program.
        A TensorFlow source runs in TensorFlow: one whose graph touches the file system or the network, calls Python
        or uses queues is refused before anything runs unless ``trust_model=True``.
        """
        from .verify.compare import resolve_oracle, verify_tflite

        if self.graph.source.format == "nnef":
            # NNEF has no runtime among our dependencies: the .tflite it came from when given, else fp64
            if reference is None:
                from .verify.compare import verify_fp64

                return verify_fp64(self, inputs, seed=seed, num=num, progress=progress)
            from .converter.frontends import read_source

            ref, _ = read_source(reference)
            return verify_tflite(self, inputs=inputs, seed=seed, num=num, oracle=oracle,
                                 reference_kernels=reference_kernels, tflite=ref, progress=progress)
        if self.tf_source is not None:
            qat = self.graph.record.qat or {}
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
            return verify_tensorflow(self, self.tf_source, inputs, seed=seed, num=num, trust_model=trust_model)
        if self.source is None:
            raise ModelLoadError("this model has no source to verify against")
        if self.state_variables:
            # a stateful program: LiteRT's resource variables carry state from one invocation to the next, so the
            # input sets are compared as consecutive steps of one stream (a session on our side)
            from .executor.session import Session

            names = Session(self.graph).input_names
            frames = ({n: np.stack([np.asarray(st[n]) for st in inputs]) for n in names
                       if all(n in st for st in inputs)} if inputs is not None else None)
            steps = len(inputs) if inputs is not None else num
            return self.verify_steps(steps, frames, seed=seed, oracle=resolve_oracle(oracle, reference_kernels,
                                                                                    tensorflow_source=False),
                                     progress=progress)
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


def _options(where: str, options: ConvertOptions | None, keywords: Mapping[str, Any]) -> ConvertOptions:
    """``options`` with ``keywords`` applied (the defaults when None); an unknown keyword is a TypeError naming the
    closest option names."""
    if options is None:
        return ConvertOptions.from_keywords(where, **keywords)
    check_keywords(where, keywords, ConvertOptions.names())
    return options.replace(**keywords) if keywords else options


def convert(source: Any, options: ConvertOptions | None = None, /, **keywords: Any) -> TosaModel:
    """Convert a model to TOSA 1.0: a ``.tflite`` (path or bytes), an NNEF model (directory, ``.tgz`` or
    ``graph.nnef``), a TensorFlow SavedModel directory, a ``.keras`` / ``.h5`` file, a frozen GraphDef ``.pb``, a
    ``keras.Model`` or a ``tf.function`` / ConcreteFunction.

    The keywords are the fields of :class:`~tf2tosa.options.ConvertOptions`, one to one (``docs/api-options.md``
    lists each with its default and its command-line flag); ``options`` gives them as one record instead, the
    keywords overriding its fields.  An unknown keyword is a :class:`TypeError` naming the closest valid ones.
    ``dynamic=True`` converts as :func:`convert_dynamic` does.  The frontend is the first of
    :data:`tf2tosa.converter.frontends.FRONTENDS` that claims ``source``.
    """
    from .converter.frontends import convert_source

    opts = _options("convert", options, keywords)
    if opts.dynamic:
        return convert_dynamic(source, opts)
    if opts.hints is not None or opts.symbol is not None:
        raise InputError("hints= and symbol= (--hint) choose the sizes of a symbolic conversion: they apply with "
                         "dynamic=True (convert_dynamic) only",
                         file=os.fspath(source) if isinstance(source, (str, os.PathLike)) else None)
    done = convert_source(source, opts)
    return TosaModel(done.graph, source=done.source, source_path=done.source_path, tf_source=done.tf_source)


def convert_dynamic(source: Any, options: ConvertOptions | None = None, /, **keywords: Any) -> TosaModel:
    """Convert a model with unknown dimensions into one symbolic TOSA 1.1-draft program (``--dynamic``).

    Every unknown input dimension that ``dims`` (``--dim``, which fixes a symbol) and ``input_shapes`` leave open
    stays symbolic (``batch``, ``d1`` …: ``tf2tosa inspect`` lists them); ``symbol`` keeps only that one
    symbolic (the others are fixed as :func:`convert` fixes them).  The other keywords are :func:`convert`'s.
    The model is converted once with each open dimension a :class:`~tf2tosa.ir.symdim.SymDim` whose sample size
    is ``hints[symbol]`` (``--hint``) or the stated default (:data:`~tf2tosa.converter.dynamic.DEFAULT_HINTS`:
    3 for ``batch``, 401 for any other, then 402 and 400 when the model does not convert at the first), so the
    lowerings' own shape arithmetic yields every dimension's
    expression; a second conversion at other sample sizes (leaving a remainder in the divisions the sizes go
    through, a strided window's: :func:`~tf2tosa.converter.dynamic.check_hints`) checks that nothing depended on
    the samples (:func:`tf2tosa.converter.dynamic.symbolise`); what that cannot express yet is one
    :class:`~tf2tosa.errors.NotYetError` (:mod:`tf2tosa.converter.dynamic_convert`).
    The result's :meth:`TosaModel.to_mlir` is declared 1.1.draft; ``save`` writes a 1.1-draft ``.tosa`` flatbuffer
    (``fbs_version 1.1.0d``, Arm's draft schema) and the MLIR text, or the MLIR text only to a ``.mlir`` path.
    """
    from .converter import dynamic_convert

    opts = _options("convert_dynamic", options, keywords)
    done = dynamic_convert.convert_dynamic(source, opts.replace(dynamic=True))
    return TosaModel(done.graph, source=done.source, source_path=done.source_path)


def _validate_loaded(graph: Graph, name: str | None, dynamic: bool = False) -> None:
    """Check every op of a read ``.tosa`` (regions included) against the catalogue, as the builder checks the ops it
    creates: a file whose declared shapes or types the spec forbids is refused here, not run.  ``dynamic``: a
    1.1-draft program, whose shape operands may be computed at run time (EXT-DYNAMIC)."""
    from .tosa import validation

    for op in graph.topological_order():
        try:
            validation.validate_op(op, dynamic=dynamic)
        except InvalidGraphError as e:
            raise InvalidGraphError(e.message, file=name, op=f"{op.opcode}#{op.id}",
                                    tensor=e.tensor or (op.results[0].name if op.results else None)) from None
        for region in op.regions:
            _validate_loaded(region, name, dynamic)


#: MLIR spellings of the profiles in ``tosa.target_env`` (the extensions are the spec's names lower-cased, no EXT-)
_MLIR_PROFILES = {"pro_int": "PRO-INT", "pro_fp": "PRO-FP"}


def declared_target(text: str) -> dict[str, Any] | None:
    """The ``tosa.target_env`` an MLIR module declares: ``specification_version``, ``level``, ``profiles`` and
    ``extensions`` (spec names: ``PRO-FP``, ``EXT-SHAPE``); None when the module declares none."""
    import re

    m = re.search(r"#tosa\.target_env<([^>]*)>", text)
    if m is None:
        return None
    body = m.group(1)

    def field(key: str) -> str | None:
        f = re.search(key + r'\s*=\s*("([^"]*)"|\[([^\]]*)\])', body)
        if f is None:
            return None
        return f.group(2) if f.group(2) is not None else f.group(3)

    def items(key: str) -> list[str]:
        return [x.strip() for x in (field(key) or "").split(",") if x.strip()]

    return {"specification_version": field("specification_version") or "1.0", "level": field("level"),
            "profiles": sorted(_MLIR_PROFILES.get(p, p.upper()) for p in items("profiles")),
            "extensions": sorted(f"EXT-{e.upper()}" for e in items("extensions"))}


def _mlir_to_tosa(path: str | os.PathLike[str]) -> tuple[bytes, str, dict[str, Any] | None]:
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
    target = declared_target(text)
    from .serializer.mlir import module_dim_facts

    guards, hints = module_dim_facts(text)
    if target is not None and guards is not None:
        target["dim_guards"] = guards
    if target is not None and hints is not None:
        target["dim_hints"] = hints
    try:
        return tosa_tools.serialize_mlir(text), name, target
    except tosa_tools.ToolError as first:
        from .verify import iree

        if iree.available():
            from iree.compiler.tools.binaries import find_tool

            proc = subprocess.run([find_tool("iree-opt"), "--mlir-print-op-generic", "-"], input=text, text=True,
                                  capture_output=True, check=False)
            if proc.returncode == 0:
                try:
                    return tosa_tools.serialize_mlir(proc.stdout), name, target
                except tosa_tools.ToolError:
                    pass
        lines = [ln.strip() for ln in str(first).splitlines() if "error:" in ln]
        raise ModelLoadError(f"not TOSA-dialect MLIR that tosa-opt can read: {lines[0] if lines else first}",
                             file=name) from None


def load(path: str | os.PathLike[str] | bytes) -> TosaModel:
    """Read a ``.tosa`` flatbuffer (path or bytes) back into a TosaModel; a ``.mlir`` path is TOSA-dialect MLIR
    text, serialized to a flatbuffer by Arm's ``tosa-opt`` first (needs the tosa-tools environment).  An ``io="int"``
    sidecar next to a ``.tosa`` (``model.json``) restores :attr:`TosaModel.io_quantization`."""
    from .serializer import from_bytes
    from .tosa import profiles
    from .tosa.optable import DRAFT_VERSION

    declared = None
    if isinstance(path, (str, os.PathLike)):
        from .outputs import check_input

        check_input(path, ModelLoadError)  # a FIFO, a device or a socket is refused before it is opened
    from_mlir = isinstance(path, str | os.PathLike) and os.fspath(path).endswith(".mlir")
    if from_mlir and not isinstance(path, bytes):
        data, name, declared = _mlir_to_tosa(path)
    else:
        from .converter.frontends import read_source

        data, name = read_source(path)
    graph = from_bytes(data, name=name)
    if from_mlir:  # read from MLIR text: each op's location names the user's file, not tosa-opt's copy
        _relocate(graph, name)
    symbolic = graph.record.specification_version == DRAFT_VERSION
    if declared is not None and declared["specification_version"] != DRAFT_VERSION and symbolic:
        raise ModelLoadError(f"the module declares TOSA {declared['specification_version']} but has unknown "
                             f"dimensions or EXT-SHAPE operators (TOSA {DRAFT_VERSION})", file=name)
    _validate_loaded(graph, name, dynamic=symbolic)
    profs, exts = profiles.requirements(graph)
    if symbolic:  # as convert --dynamic declares it
        exts = sorted(set(exts) | {"EXT-SHAPE", "EXT-DYNAMIC"})
    if declared is not None:
        # the MLIR module's tf2tosa.* attributes (a .tosa has none)
        guards, hints = declared.pop("dim_guards", None), declared.pop("dim_hints", None)
        if symbolic and guards is not None:
            graph.dims.guards = guards
        if symbolic and hints is not None:
            graph.dims.hints = hints
        graph.record.declared_target = declared
        if declared["profiles"]:  # what the file says it needs (tosa-opt checks it against the program)
            profs, exts = declared["profiles"], declared["extensions"]
    graph.record.profiles, graph.record.extensions = profs, exts
    graph.source.file = name
    if not isinstance(path, (bytes, bytearray, memoryview)) and os.path.isfile(sidecar_path(path)):
        _read_sidecar(graph, sidecar_path(path))
    return TosaModel(graph)


def _relocate(graph: Graph, name: str) -> None:
    """``loc("model.mlir":L:C)`` (what :func:`tosa_tools.serialize_mlir` records) → ``loc("BASENAME":L:C)``, the
    name of the file read (not its directory: the ops' locations are written into a ``.tosa`` made from them)."""
    import json

    for op in graph.ops.values():
        if op.location and op.location.startswith('loc("model.mlir":'):
            op.location = "loc(" + json.dumps(os.path.basename(name)) + op.location[len('loc("model.mlir"'):]
        for region in op.regions:
            _relocate(region, name)


def specialize(model: TosaModel | str | os.PathLike[str] | bytes, *,
               input_shapes: Mapping[str, Sequence[int]] | None = None,
               dims: Mapping[str, int] | None = None) -> TosaModel:
    """A static TOSA 1.0 program from a symbolic TOSA 1.1-draft one (``convert --dynamic``): ``model`` is a
    :class:`TosaModel`, a ``.tosa`` / ``.mlir`` path or ``.tosa`` bytes (:func:`load`).

    ``input_shapes`` sets whole input shapes (``{"x": (4, 16, 16, 3)}``), ``dims`` the size of each dimension
    symbol (``{"batch": 4}``; the names :func:`load` gives unknown dimensions: ``batch`` for dimension 0 of an
    input, ``d<k>`` for dimension k; ``tf2tosa inspect`` lists them).  Every shape operator is evaluated to a
    CONST_SHAPE, every ASSERT_EQUAL_SHAPE checked and dropped, every value's shape inferred with the 1.0 rules and
    the result declares the profiles and extensions it needs (:mod:`tf2tosa.converter.specialize`).  Bad sizes,
    or a program that is not symbolic, are one :class:`InputError`.  ``model`` itself is not changed."""
    from .converter.specialize import specialize_graph
    from .serializer import from_bytes

    if isinstance(model, TosaModel):
        name = model.source_path or model.graph.source.file
        graph = from_bytes(model.to_bytes(), name=name or "<model>")  # a copy, as a file would give it
        graph.record.io_quantization = model.graph.record.io_quantization
        graph.record.unsigned_io = model.graph.record.unsigned_io
        source = model
    else:
        source = load(model)
        graph = source.graph
        name = graph.source.file
    specialize_graph(graph, input_shapes=input_shapes, dims=dims, file=name)
    return TosaModel(graph, source=source._source, source_path=source.source_path, tf_source=source.tf_source)


def _read_sidecar(graph: Graph, side: str) -> None:
    """``graph.record.io_quantization`` from the ``io="int"`` sidecar ``side`` (entries matched to the graph by
    name)."""
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
    graph.record.io_quantization = meta
