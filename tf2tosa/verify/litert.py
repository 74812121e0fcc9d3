"""Run ``.tflite`` models in LiteRT, the reference oracle, in a child process.

The LiteRT interpreter can abort the whole process on a malformed model, so every run happens in a fresh
``python`` child that imports only ``ai_edge_litert`` (never TensorFlow).  Arrays travel through ``.npz``
files in a temporary directory.  Model metadata (inputs, outputs, op names) is read in-process straight
from the flatbuffer with the ``tflite`` package, which is safe and fast.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConversionError

__all__ = [
    "LiteRTError",
    "LiteRTWorker",
    "input_details",
    "model_op_names",
    "output_details",
    "random_inputs",
    "reference_resolver_model",
    "run_tflite",
    "run_tflite_many",
    "run_tflite_tensors",
]

ModelLike = bytes | bytearray | str | Path
Inputs = Mapping[str, np.ndarray] | Sequence[np.ndarray]

DEFAULT_TIMEOUT = 900.0


class LiteRTError(ConversionError, RuntimeError):
    """LiteRT could not load or run the model (its child process failed).

    ``str(e)`` is one line: the failure and the last line of the child's error output (LiteRT's own reason,
    e.g. a model it rejects); ``full_message`` keeps the whole message and ``stderr`` the child's error output."""

    def __init__(self, message: str, *, returncode: int | None = None, stderr: str = "") -> None:
        head, _, rest = message.partition("\n")
        last = [line.strip() for line in rest.splitlines() if line.strip()]
        super().__init__(head.rstrip(":") + (f": {last[-1][:300]}" if last else ""))
        self.full_message = message
        self.returncode = returncode
        self.stderr = stderr

    def details(self) -> dict[str, Any] | None:
        return {"returncode": self.returncode, "stderr": self.stderr[-2000:]} if self.stderr else None


# --------------------------------------------------------------------------------------------------
# Flatbuffer metadata
# --------------------------------------------------------------------------------------------------

# tflite TensorType enum value -> numpy dtype name
_TFL_DTYPES: dict[int, str] = {
    0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 5: "object", 6: "bool", 7: "int16",
    8: "complex64", 9: "int8", 10: "float64", 11: "complex128", 12: "uint64", 15: "uint32", 16: "uint16",
    17: "int4",
}


def _model_bytes(model: ModelLike) -> bytes:
    if isinstance(model, bytes | bytearray):
        return bytes(model)
    return Path(model).read_bytes()


def _tfl_model(buf: bytes) -> Any:
    import tflite

    if len(buf) < 8 or buf[4:8] != b"TFL3":
        raise LiteRTError(f"not a TFLite flatbuffer (no TFL3 identifier; {len(buf)} bytes)")
    try:
        m = tflite.Model.GetRootAsModel(buf, 0)
        if m.SubgraphsLength() < 1:
            raise LiteRTError("TFLite model has no subgraph")
        return m
    except LiteRTError:
        raise
    except Exception as e:  # struct.error / IndexError from a truncated or corrupt flatbuffer
        raise LiteRTError(f"corrupt TFLite flatbuffer: {type(e).__name__}: {e}") from e


def reference_resolver_model(buf: bytes) -> bytes:
    """``buf`` as LiteRT's reference op resolver (BUILTIN_REF) can load it: DEPTH_TO_SPACE's operator code at
    version 1.

    TFLite's converter writes DEPTH_TO_SPACE as version 2 (the version that admits int8), but the reference resolver
    (``register_ref.cc``) registers ``Register_DEPTH_TO_SPACE_REF()`` for version 1 only, so such a model fails with
    "Didn't find op for builtin opcode 'DEPTH_TO_SPACE' version '2' … Registration failed".  The version number
    selects no code: the registered reference kernel's Eval switches on the tensor type and has float32, uint8, int8,
    int32 and int64 cases (``reference_ops::DepthToSpace<T>``), so the patched model runs the very reference kernel
    version 2 would.  Only that 4-byte field changes; a model without it comes back unchanged (the same object).
    """
    import tflite

    m = _tfl_model(buf)
    patch = []
    for i in range(m.OperatorCodesLength()):
        oc = m.OperatorCodes(i)
        if max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode()) == tflite.BuiltinOperator.DEPTH_TO_SPACE \
                and oc.Version() > 1:
            patch.append(oc._tab.Pos + oc._tab.Offset(8))  # OperatorCode.version: field 2, vtable slot 4 + 2·2
    if not patch:
        return buf
    out = bytearray(buf)
    for pos in patch:
        out[pos:pos + 4] = (1).to_bytes(4, "little", signed=True)
    return bytes(out)


def _tensor_details(model: Any, sg: Any, index: int) -> dict[str, Any]:
    t = sg.Tensors(index)
    name = t.Name().decode("utf-8", "replace") if t.Name() is not None else f"tensor_{index}"
    shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
    if t.ShapeSignatureLength():
        sig = tuple(int(d) for d in t.ShapeSignatureAsNumpy())
    else:
        sig = shape
    dtype = _TFL_DTYPES.get(t.Type(), f"tflite_type_{t.Type()}")
    q = t.Quantization()
    scale: list[float] = []
    zero_point: list[int] = []
    qdim = 0
    if q is not None and q.ScaleLength():
        scale = [float(s) for s in q.ScaleAsNumpy()]
        zero_point = [int(z) for z in q.ZeroPointAsNumpy()] if q.ZeroPointLength() else [0] * len(scale)
        qdim = int(q.QuantizedDimension())
    quant: dict[str, Any] = {"scale": scale, "zero_point": zero_point, "quantized_dimension": qdim}
    return {"name": name, "index": index, "shape": shape, "shape_signature": sig, "dtype": dtype,
            "quantization": quant}


def input_details(model: ModelLike) -> list[dict[str, Any]]:
    """Inputs of the main subgraph in order: ``name, index, shape, shape_signature, dtype, quantization``.

    ``dtype`` is a numpy dtype name; ``quantization`` is ``{"scale": [...], "zero_point": [...],
    "quantized_dimension": int}`` (empty lists for float tensors).
    """
    m = _tfl_model(_model_bytes(model))
    sg = m.Subgraphs(0)
    return [_tensor_details(m, sg, int(i)) for i in sg.InputsAsNumpy()] if sg.InputsLength() else []


def output_details(model: ModelLike) -> list[dict[str, Any]]:
    """Outputs of the main subgraph in order, same fields as :func:`input_details`."""
    m = _tfl_model(_model_bytes(model))
    sg = m.Subgraphs(0)
    return [_tensor_details(m, sg, int(i)) for i in sg.OutputsAsNumpy()] if sg.OutputsLength() else []


def _builtin_names() -> dict[int, str]:
    import tflite

    return {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_") and isinstance(v, int)}


def model_op_names(model: ModelLike, *, subgraph: int | None = 0) -> list[str]:
    """The op of every operator, in execution order, as lower-case TFLite names (``"conv_2d"``).

    Custom ops are reported as ``"custom:<code>"``.  ``subgraph=None`` walks all subgraphs.
    """
    m = _tfl_model(_model_bytes(model))
    names = _builtin_names()
    codes: list[str] = []
    for i in range(m.OperatorCodesLength()):
        oc = m.OperatorCodes(i)
        code = max(int(oc.BuiltinCode()), int(oc.DeprecatedBuiltinCode()))
        if names.get(code) == "CUSTOM":
            custom = oc.CustomCode()
            codes.append("custom:" + (custom.decode("utf-8") if custom else "?"))
        else:
            codes.append(names.get(code, f"builtin_{code}").lower())
    sgs = range(m.SubgraphsLength()) if subgraph is None else [subgraph]
    out: list[str] = []
    for s in sgs:
        sg = m.Subgraphs(s)
        for j in range(sg.OperatorsLength()):
            out.append(codes[sg.Operators(j).OpcodeIndex()])
    return out


# --------------------------------------------------------------------------------------------------
# Random inputs
# --------------------------------------------------------------------------------------------------

Range = tuple[float, float]


def random_inputs(model_or_details: ModelLike | Sequence[Mapping[str, Any]], seed: int = 0, *,
                  ranges: Range | Mapping[str, Range] | None = None) -> dict[str, np.ndarray]:
    """Seeded random inputs keyed by input tensor name.

    Float inputs are uniform in ``[-1, 1]``; int8/uint8/int16 take their full range; int32/int64 are small
    integers in ``[0, 4)``; bool is random.  ``ranges`` overrides the range ``(lo, hi)`` for every input or
    per input name (for integer inputs the range is inclusive of ``lo``, exclusive of ``hi``).
    """
    details = (input_details(model_or_details) if isinstance(model_or_details, bytes | bytearray | str | Path)
               else list(model_or_details))
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for d in details:
        name = str(d["name"])
        shape = tuple(max(int(x), 1) for x in d["shape"])
        dt = np.dtype(d["dtype"])
        rr: Range | None
        if ranges is None or isinstance(ranges, tuple):
            rr = ranges
        else:
            rr = ranges.get(name)
        if dt.kind == "f":
            lo, hi = rr if rr is not None else (-1.0, 1.0)
            out[name] = rng.uniform(lo, hi, size=shape).astype(dt)
        elif dt == np.bool_:
            out[name] = rng.integers(0, 2, size=shape).astype(np.bool_)
        elif dt.kind in "iu":
            if rr is not None:
                lo_i, hi_i = int(rr[0]), int(rr[1])
            elif dt.itemsize <= 2:
                info = np.iinfo(dt)
                lo_i, hi_i = int(info.min), int(info.max) + 1
            else:
                lo_i, hi_i = 0, 4
            out[name] = rng.integers(lo_i, hi_i, size=shape, dtype=np.int64).astype(dt)
        else:
            raise ValueError(f"random_inputs: unsupported input dtype {dt} for {name!r}")
    return out


# --------------------------------------------------------------------------------------------------
# The child process
# --------------------------------------------------------------------------------------------------

_CHILD_JOB = r"""
import json, os, sys, traceback
import numpy as np
from ai_edge_litert import interpreter as tfl


def job(cfg):
    resolver = tfl.OpResolverType.BUILTIN_REF if cfg["reference_kernels"] else tfl.OpResolverType.AUTO
    interp = tfl.Interpreter(model_path=cfg["model"], num_threads=cfg["num_threads"],
                             experimental_op_resolver_type=resolver,
                             experimental_preserve_all_tensors=cfg["preserve_all_tensors"])
    by_name = {d["name"]: d for d in interp.get_input_details()}
    names = cfg["input_names"]
    runs = cfg["runs"]
    with np.load(cfg["inputs"], allow_pickle=False) as z:
        data = {k: z[k] for k in z.files}
    # resize inputs whose shape differs from the model's
    for k, name in enumerate(names):
        d = by_name[name]
        if runs and tuple(data[f"r0_i{k}"].shape) != tuple(d["shape"]):
            interp.resize_tensor_input(d["index"], list(data[f"r0_i{k}"].shape))
    interp.allocate_tensors()
    outs = interp.get_output_details()
    result = {"__names__": np.array([d["name"] for d in outs])}
    for r in range(runs):
        for k, name in enumerate(names):
            interp.set_tensor(by_name[name]["index"], np.ascontiguousarray(data[f"r{r}_i{k}"]))
        if not cfg.get("stream") or r == 0:  # a stream keeps the variables' state from invocation to invocation
            interp.reset_all_variables()  # each input set starts from the initial state (LSTM/RNN variables)
        interp.invoke()
        for j, d in enumerate(outs):
            result[f"r{r}_o{j}"] = np.array(interp.get_tensor(d["index"]))
        if cfg["all_tensors"]:
            for td in interp.get_tensor_details():
                try:
                    t = interp.get_tensor(td["index"])
                except Exception:
                    continue
                if t is not None and t.dtype != object:
                    result[f"r{r}_t{td['index']}"] = np.array(t)
    np.savez(cfg["outputs"], **result)
"""

_ONESHOT = _CHILD_JOB + r"""
job(json.loads(sys.argv[1]))
"""

# The persistent worker answers one JSON line per request on a private pipe (fd 1 is pointed at stderr so
# that native chatter cannot corrupt the protocol).  Python exceptions are reported and the worker lives on.
_SERVER = _CHILD_JOB + r"""
proto = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
for line in sys.stdin:
    try:
        job(json.loads(line))
        reply = {"ok": True}
    except BaseException:
        reply = {"ok": False, "error": traceback.format_exc()}
    proto.write(json.dumps(reply) + "\n")
    proto.flush()
"""


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


class LiteRTWorker:
    """A persistent LiteRT child process, to amortise interpreter start-up over many runs.

    Use as a context manager; :meth:`run`, :meth:`run_many` and :meth:`run_tensors` take the same
    arguments as the module functions.  A Python error in the child raises :class:`LiteRTError` and the
    worker carries on; if the child dies (abort, segfault, timeout) the error carries its stderr and the
    next call starts a fresh child.
    """

    def __init__(self) -> None:
        self._proc: subprocess.Popen[str] | None = None
        self._stderr: Any = None

    def _start(self) -> subprocess.Popen[str]:
        if self._proc is None or self._proc.poll() is not None:
            self._stderr = tempfile.TemporaryFile(mode="w+", prefix="tf2tosa-litert-stderr-")
            self._proc = subprocess.Popen([sys.executable, "-c", _SERVER], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=self._stderr, text=True,
                                          env=_child_env())
        return self._proc

    def _stderr_text(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.flush()
        self._stderr.seek(0)
        text = str(self._stderr.read())
        self._stderr.seek(0, 2)
        return text

    def request(self, cfg: dict[str, Any], timeout: float) -> None:
        import select

        proc = self._start()
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps(cfg) + "\n")
            proc.stdin.flush()
        except BrokenPipeError:
            pass
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        line = proc.stdout.readline() if ready else ""
        if not line:
            timed_out = not ready
            proc.kill()
            rc = proc.wait()
            err = self._stderr_text()
            self.close()
            how = (f"timed out after {timeout:.0f}s" if timed_out else
                   f"killed by signal {-rc}" if rc < 0 else f"exit status {rc}")
            head = _died(f"LiteRT worker died ({how})", None if timed_out else rc, bool(cfg.get("reference_kernels")))
            raise LiteRTError(f"{head}:\n{err.strip()[-4000:]}", returncode=rc, stderr=err)
        reply = json.loads(line)
        if not reply["ok"]:
            raise LiteRTError(f"LiteRT worker failed:\n{reply['error'].strip()[-4000:]}", returncode=None,
                              stderr=reply["error"])

    def close(self) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                assert self._proc.stdin is not None
                self._proc.stdin.close()
                try:
                    self._proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
            if self._proc.stdout is not None:
                self._proc.stdout.close()
            self._proc = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def __enter__(self) -> LiteRTWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def run(self, model: ModelLike, inputs: Inputs, *, reference_kernels: bool = False,
            preserve_all_tensors: bool = False, num_threads: int = 1,
            timeout: float = DEFAULT_TIMEOUT) -> dict[str, np.ndarray]:
        return run_tflite(model, inputs, reference_kernels=reference_kernels,
                          preserve_all_tensors=preserve_all_tensors, num_threads=num_threads, timeout=timeout,
                          worker=self)

    def run_many(self, model: ModelLike, input_sets: Sequence[Inputs], *, reference_kernels: bool = False,
                 preserve_all_tensors: bool = False, num_threads: int = 1,
                 timeout: float = DEFAULT_TIMEOUT) -> list[dict[str, np.ndarray]]:
        return run_tflite_many(model, input_sets, reference_kernels=reference_kernels,
                               preserve_all_tensors=preserve_all_tensors, num_threads=num_threads,
                               timeout=timeout, worker=self)

    def run_tensors(self, model: ModelLike, inputs: Inputs, *, reference_kernels: bool = False,
                    num_threads: int = 1, timeout: float = DEFAULT_TIMEOUT) -> dict[int, np.ndarray]:
        return run_tflite_tensors(model, inputs, reference_kernels=reference_kernels, num_threads=num_threads,
                                  timeout=timeout, worker=self)


def _normalise_inputs(inputs: Inputs, details: list[dict[str, Any]]) -> list[np.ndarray]:
    names = [str(d["name"]) for d in details]
    if isinstance(inputs, Mapping):
        unknown = [k for k in inputs if k not in names]
        missing = [n for n in names if n not in inputs]
        if unknown or missing:
            raise ValueError(f"inputs do not match the model: unknown {unknown}, missing {missing}; "
                             f"model inputs are {names}")
        arrays = [np.asarray(inputs[n]) for n in names]
    else:
        arrays = [np.asarray(a) for a in inputs]
        if len(arrays) != len(names):
            raise ValueError(f"{len(arrays)} inputs given, the model has {len(names)}: {names}")
    for a, d in zip(arrays, details):
        if a.dtype != np.dtype(d["dtype"]):
            raise ValueError(f"input {d['name']!r}: dtype {a.dtype} given, the model wants {d['dtype']}")
    return arrays


def _died(head: str, returncode: int | None, reference_kernels: bool) -> str:
    """The first line of a LiteRT child's death: with the reference kernels, a signal (an abort: a TFLITE_CHECK or
    gemmlowp assertion in a reference kernel, e.g. a softmax scale its reference scaling cannot take) names the
    oracle that avoids them."""
    if reference_kernels and returncode is not None and returncode < 0:
        return (f"LiteRT's reference kernels aborted on this model (signal {-returncode}); try --oracle optimized "
                "(LiteRT's default kernels)")
    return head


def _run(model: ModelLike, input_sets: Sequence[Inputs], *, reference_kernels: bool, preserve_all_tensors: bool,
         num_threads: int, all_tensors: bool, timeout: float,
         worker: LiteRTWorker | None, stream: bool = False) -> tuple[list[str], list[dict[str, np.ndarray]]]:
    buf = _model_bytes(model)
    details = input_details(buf)
    arrays = [_normalise_inputs(s, details) for s in input_sets]
    run_buf = reference_resolver_model(buf) if reference_kernels else buf
    with tempfile.TemporaryDirectory(prefix="tf2tosa-litert-") as tmp:
        if isinstance(model, str | Path) and run_buf is buf:
            model_path = str(Path(model).resolve())
        else:
            model_path = os.path.join(tmp, "model.tflite")
            Path(model_path).write_bytes(run_buf)
        in_path = os.path.join(tmp, "inputs.npz")
        out_path = os.path.join(tmp, "outputs.npz")
        payload: dict[str, Any] = {f"r{r}_i{k}": a for r, arrs in enumerate(arrays) for k, a in enumerate(arrs)}
        np.savez(in_path, **payload)
        cfg = {"model": model_path, "inputs": in_path, "outputs": out_path, "runs": len(arrays),
               "input_names": [d["name"] for d in details], "reference_kernels": reference_kernels,
               "preserve_all_tensors": preserve_all_tensors or all_tensors, "num_threads": num_threads,
               "all_tensors": all_tensors, "stream": stream}
        if worker is not None:
            worker.request(cfg, timeout)
        else:
            try:
                proc = subprocess.run([sys.executable, "-c", _ONESHOT, json.dumps(cfg)], capture_output=True,
                                      text=True, timeout=timeout, env=_child_env())
            except subprocess.TimeoutExpired as e:
                raise LiteRTError(f"LiteRT child timed out after {timeout:.0f}s") from e
            if proc.returncode != 0 or not os.path.exists(out_path):
                how = (f"killed by signal {-proc.returncode}" if proc.returncode < 0
                       else f"exit status {proc.returncode}")
                tail = proc.stderr.strip()[-4000:]
                head = _died(f"LiteRT child failed ({how})", proc.returncode, reference_kernels)
                raise LiteRTError(f"{head}:\n{tail}", returncode=proc.returncode, stderr=proc.stderr)
        with np.load(out_path, allow_pickle=False) as z:
            names = [str(n) for n in z["__names__"]]
            results: list[dict[str, np.ndarray]] = []
            for r in range(len(arrays)):
                res = {f"o{j}": z[f"r{r}_o{j}"] for j in range(len(names))}
                if all_tensors:
                    prefix = f"r{r}_t"
                    res.update({k[len(prefix) - 1:]: z[k] for k in z.files if k.startswith(prefix)})
                results.append(res)
    return names, results


def run_tflite(model: ModelLike, inputs: Inputs, *, reference_kernels: bool = False,
               preserve_all_tensors: bool = False, num_threads: int = 1, timeout: float = DEFAULT_TIMEOUT,
               worker: LiteRTWorker | None = None) -> dict[str, np.ndarray]:
    """Run ``model`` once in LiteRT; returns ``{output tensor name: array}`` in the model's output order.

    ``inputs`` is keyed by input tensor name or is a list in the model's input order; dtypes must match the
    model exactly.  If an input's shape differs from the model's, the input is resized first.
    ``reference_kernels`` selects LiteRT's reference (BUILTIN_REF) kernels.
    Raises :class:`LiteRTError` (with the child's stderr) if the interpreter fails or aborts.
    Each call starts a fresh child process unless a :class:`LiteRTWorker` is given.
    """
    return run_tflite_many(model, [inputs], reference_kernels=reference_kernels,
                           preserve_all_tensors=preserve_all_tensors, num_threads=num_threads, timeout=timeout,
                           worker=worker)[0]


def run_tflite_many(model: ModelLike, input_sets: Sequence[Inputs], *, reference_kernels: bool = False,
                    preserve_all_tensors: bool = False, num_threads: int = 1, timeout: float = DEFAULT_TIMEOUT,
                    worker: LiteRTWorker | None = None, stream: bool = False) -> list[dict[str, np.ndarray]]:
    """Like :func:`run_tflite` for several input sets, with one child process and one interpreter.

    With ``stream`` the input sets are consecutive invocations of one stream: the interpreter's variable tensors are
    reset once, before the first, and keep their state from each invocation to the next (resource variables keep
    theirs in any case, as LiteRT does)."""
    names, results = _run(model, input_sets, reference_kernels=reference_kernels,
                          preserve_all_tensors=preserve_all_tensors, num_threads=num_threads, all_tensors=False,
                          timeout=timeout, worker=worker, stream=stream)
    if len(set(names)) != len(names):
        raise LiteRTError(f"model has duplicate output tensor names {names}")
    return [{n: res[f"o{j}"] for j, n in enumerate(names)} for res in results]


def run_tflite_tensors(model: ModelLike, inputs: Inputs, *, reference_kernels: bool = False, num_threads: int = 1,
                       timeout: float = DEFAULT_TIMEOUT, worker: LiteRTWorker | None = None) -> dict[int, np.ndarray]:
    """Run once with all intermediate tensors preserved; returns ``{tensor index: array}`` for every tensor
    of the main subgraph LiteRT could read (constants, inputs, intermediates and outputs)."""
    _, results = _run(model, [inputs], reference_kernels=reference_kernels, preserve_all_tensors=True,
                      num_threads=num_threads, all_tensors=True, timeout=timeout, worker=worker)
    return {int(k[1:]): v for k, v in results[0].items() if k.startswith("t")}
