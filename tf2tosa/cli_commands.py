"""The ``tf2tosa`` commands other than ``convert``: specialize, run, inspect, verify, zoo, ops and demo, registered on
:data:`tf2tosa.cli_base.app` when this module is imported.  :func:`tf2tosa.cli.app_for` imports it for any command
but ``convert`` (and for the whole app: ``--help``, shell completion): a conversion does not hold these commands'
code and options (the fp16 model's peak RSS is held to twice its file by bench_convert).
"""

from __future__ import annotations

import io
import os
import time
from enum import Enum
from pathlib import Path
from typing import Any

import typer

from .cli_base import (
    CUSTOM_OBJECTS,
    CUT_INPUTS,
    CUT_OUTPUTS,
    IO,
    JSON,
    KEEP_VARIABLES,
    MAX_EXTRACT,
    NPU_ROUNDING,
    ORACLE,
    QUIET,
    STATE_IO,
    TAG,
    TARGET_HELP,
    TRUST_MODEL,
    UNSAFE_DESERIALIZATION,
    VERBOSE,
    MlirSyntax,
    TargetName,
    _custom_objects,
    _custom_ops,
    _cut,
    _is_tflite,
    _keep_variables,
    _model_facts,
    _out,
    _print_report,
    _progress,
    _quiet_deps,
    _target,
    _unsafe,
    _user_errors,
    app,
    parse_dims,
    parse_shapes,
)
from .cli_output import (
    EXIT_VERIFY,
    Out,
    op_counts,
    ops_text,
)
from .errors import InputError
from .options import ConvertOptions


class Backend(str, Enum):
    """--backend (tf2tosa.api.BACKENDS)"""

    executor = "executor"
    iree = "iree"
    vgf = "vgf"


#: how the report names each backend
_BACKEND_NAMES = {Backend.executor: "executor", Backend.iree: "IREE", Backend.vgf: "VGF"}
BACKEND = typer.Option(Backend.executor, "--backend",
                       help="executor (the embedded executor, the oracle), iree (compile the MLIR with IREE, "
                       "cached by content, and run that; needs the [iree] extra) or vgf (convert the .tosa to a VGF "
                       "with Arm's model converter, cached by content, and run that on a Vulkan device; `make vgf`)")
STEPS_HELP = ("run N consecutive invocations of one stream, the state carried from each to the next; --input "
              "NAME=frames.npy gives the frames (leading axis: the step)")
STATE_HELP = "NAME=state.npy: the state variable's value before the first step (repeatable)"
INPUT_NPY = typer.Option(None, "--input", metavar="NAME=FILE.npy", help="NAME=x.npy (repeatable)")
SIGNATURE = typer.Option("serving_default", "--signature", help="SavedModel signature")


def _load_inputs(items: list[str] | None, option: str = "--input") -> dict[str, Any]:
    import numpy as np

    out: dict[str, Any] = {}
    for item in items or []:
        name, sep, path = item.partition("=")
        if not sep:
            raise InputError(f"bad {option} {item!r}; expected NAME=file.npy")
        from .outputs import check_input

        check_input(path)  # a FIFO or a device is refused before it is opened
        try:
            out[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise InputError(f"cannot read {option} file {path!r}: {e}", tensor=name) from None
    return out


def _npy_files(items: list[str] | None, option: str = "--input") -> list[tuple[str, str]]:
    """The files of ``--input``/``--state NAME=FILE.npy`` items, as inputs of :func:`tf2tosa.outputs.check_paths`."""
    return [(f"the {option} file", item.partition("=")[2]) for item in items or [] if "=" in item]


def _check_inputs(m: Any, given: dict[str, Any]) -> dict[str, Any]:
    """``given`` (from --input), after checking each name is an input of the model and each dtype its dtype."""
    import numpy as np

    by_name = {v.name: v for v in m.graph.inputs}
    int_io = {e["name"] for e in (m.io_quantization or {}).get("inputs", [])}
    for k, arr in list(given.items()):
        v = by_name.get(k)
        if v is None:
            raise InputError(f"no model input named {k!r} (inputs: {', '.join(sorted(by_name))})", tensor=k)
        want = np.dtype(v.dtype.np_dtype())
        if k in int_io and arr.dtype.kind == "f":
            continue  # float data for an integer model input (--io int): quantized on the host as TFLite would
        if arr.dtype != want:
            if arr.dtype.kind in "iu" and want.kind in "iu" and arr.dtype.itemsize == want.itemsize:
                given[k] = arr.view(want)  # uint8 data for an i8 input carrying uint8 bits, and the like
            else:
                raise InputError(f"input {k!r}: dtype {arr.dtype} given, the model wants {want}", tensor=k)
    return given


def _echo_io_quantization(out: Out, m: Any) -> None:
    """The scales and zero points of an ``--io int`` program's integer edges (real = scale × (q − zero_point))."""
    q = m.io_quantization
    if not q:
        return
    out.echo("integer I/O (--io int; real = scale * (q - zero_point)):")
    for role in ("inputs", "outputs"):
        for e in q[role]:
            out.echo(f"  {role[:-1]:6s} {e['name']}: {e['dtype']} scale={e['scale']!r} zero_point={e['zero_point']} "
                     f"(source {e['float_dtype']})")


@app.command()
@_user_errors
def specialize(model: Path = typer.Argument(..., metavar="MODEL",
                                            help="a symbolic TOSA 1.1-draft program: .tosa or .mlir (convert "
                                            "--dynamic)"),
               output: Path = typer.Option(..., "-o", "--output", metavar="PATH",
                                           help="the static TOSA 1.0 .tosa file to write"),
               mlir: Path | None = typer.Option(None, "--mlir", metavar="PATH",
                                                help="also write TOSA-dialect MLIR text here"),
               mlir_syntax: MlirSyntax = typer.Option(MlirSyntax.generic, "--mlir-syntax",
                                                      help="syntax of the --mlir text: generic or upstream"),
               input_shape: list[str] | None = typer.Option(None, "--input-shape", metavar="NAME=DIMS",
                                                            help="NAME=4,16,16,3 (repeatable)"),
               dim: list[str] | None = typer.Option(None, "--dim", metavar="SYMBOL=VALUE",
                                                    help="size of every input dimension named SYMBOL (batch, d1 …: "
                                                    "`inspect` lists them; repeatable)"),
               json_: bool = JSON, quiet: bool = QUIET, verbose: bool = VERBOSE,
               ) -> dict[str, Any]:
    """Fold a symbolic TOSA 1.1-draft program (convert --dynamic) into a static TOSA 1.0 program at the given
    input sizes: shape operators become constants, shape assertions are checked, every shape becomes static."""
    from .api import sidecar_path
    from .api import specialize as do_specialize
    from .converter.passes.input_shapes import fixed_dims_lines
    from .outputs import check_paths

    out = _out()
    side = sidecar_path(model) if os.path.isfile(sidecar_path(model)) else None  # an --io int program's scales
    check_paths([("the input model", model), ("the input model's .json sidecar", side)],
                [("the -o output", output), ("the --mlir output", mlir),
                 ("the .json sidecar", sidecar_path(output) if side else None)])
    t0 = time.perf_counter()
    with _progress(f"specialize {model.name}") as prog:
        prog(0, 2, "folding shapes")
        m = do_specialize(str(model), input_shapes=parse_shapes(input_shape, str(model)),
                          dims=parse_dims(dim, file=str(model)))
        prog(1, 2, "writing")
        m.save(output, mlir=mlir, mlir_syntax=mlir_syntax.value)
    ops = op_counts(m.graph.ops.values())[0]
    seconds = time.perf_counter() - t0
    done = m.graph.record.specialized or {}
    out.result(f"wrote {output} (TOSA 1.0, {ops_text(m.graph.ops.values())}; profiles "
               f"{', '.join(m.profiles) or '-'}; extensions {', '.join(m.extensions) or '-'}) in {seconds:.2f}s")
    for line in fixed_dims_lines(m.graph.record.fixed_dims):
        out.result(line)
    out.info(f"{done.get('shape_ops_folded', 0)} shape operator(s) folded to constants, "
             f"{done.get('assertions_checked', 0)} shape assertion(s) checked")
    for w in m.graph.record.warnings:
        out.warn_once(str(w))
    return {"input": str(model), "output": str(output), "mlir": str(mlir) if mlir else None, "ops": ops,
            **_model_facts(m), "shape_ops_folded": int(done.get("shape_ops_folded", 0)),
            "assertions_checked": int(done.get("assertions_checked", 0)), "seconds": round(seconds, 3)}


@app.command()
@_user_errors
def run(model: Path = typer.Argument(..., metavar="MODEL", help="a .tosa file"),
        input: list[str] | None = INPUT_NPY,
        output_dir: Path | None = typer.Option(None, "--output-dir", metavar="DIR",
                                               help="write each output as NAME.npy"),
        seed: int = typer.Option(0, help="seed for inputs not given with --input"),
        profile_ops: bool = typer.Option(False, "--profile-ops", help="print the time spent in each op"),
        repeat: int = typer.Option(1, "--repeat", metavar="N", help="run N times on the same inputs (outputs and "
                                   "--profile-ops of the last run; from the third run the prepared forms are used)"),
        backend: Backend = BACKEND,
        steps: int | None = typer.Option(None, "--steps", metavar="N", help=STEPS_HELP),
        state: list[str] | None = typer.Option(None, "--state", metavar="NAME=FILE.npy", help=STATE_HELP),
        dequantize: bool = typer.Option(False, "--dequantize", help="--io int programs: give the integer outputs "
                                        "as float, dequantized as TFLite would (float inputs are always accepted)"),
        input_shape: list[str] | None = typer.Option(None, "--input-shape", metavar="NAME=DIMS",
                                                     help="symbolic (1.1-draft) programs: the shape of a random "
                                                     "input, NAME=4,16,16,3 (repeatable)"),
        dim: list[str] | None = typer.Option(None, "--dim", metavar="SYMBOL=VALUE",
                                             help="symbolic (1.1-draft) programs: the size of every input dimension "
                                             "named SYMBOL, for the random inputs (repeatable)"),
        json_: bool = JSON, quiet: bool = QUIET, verbose: bool = VERBOSE,
        ) -> dict[str, Any]:
    """Run a .tosa file in the embedded executor (or, with --backend iree, in IREE; with --backend vgf, on a Vulkan
    device through Arm's ML SDK for Vulkan; with --steps, as a stream of invocations)."""
    from .api import load
    from .outputs import check_paths
    from .verify.compare import random_inputs

    out = _out()
    reads = _run_preflight(model, input, state, backend=backend, profile_ops=profile_ops, repeat=repeat)
    m = load(str(model))
    if backend is Backend.executor and all(v.type.is_static for v in m.graph.inputs):
        from .executor.runner import check_sizes

        check_sizes(m.graph)  # a tensor above the execution budget: its one line before any input is made
    if output_dir is not None:  # the arrays' names are the program's: known once it is read, before it runs
        check_paths(reads, _output_arrays(m, output_dir, steps is not None or bool(state)))
    given = _check_inputs(m, _load_inputs(input))
    if steps is not None or state:
        if repeat != 1:
            raise InputError("--repeat runs one invocation N times; it does not combine with --steps/--state")
        if profile_ops:
            raise InputError("--profile-ops profiles one run; it does not combine with --steps/--state")
        n = steps if steps is not None else 1
        return _run_steps(m, model, given, n, _load_inputs(state, "--state"), output_dir, seed)
    sizes = _random_input_sizes(m, model, given, input_shape, dim)
    feed = m.quantize_inputs({**random_inputs(m.graph, seed, sizes), **given})
    with _progress(f"run {model.name}") as prog:
        prog(0, 1, "executing")
        if profile_ops:
            outs, profile = _run_profiled(out, m, feed, repeat)
        else:
            outs, profile = _run_program(out, m, model, feed, backend, repeat), None
    if dequantize:
        outs = m.dequantize_outputs(outs)
    results = _output_results(out, outs, output_dir)
    return {"model": str(model), "seed": seed, "backend": backend.value, "outputs": results, "profile": profile,
            "steps": None, "state": []}


def _run_preflight(model: Path, input: list[str] | None, state: list[str] | None, *, backend: Backend,
                   profile_ops: bool, repeat: int) -> list[tuple[str, Any]]:
    """``run``'s checks before the program is read (the files it reads, the backend, flags that do not combine);
    returns the files it reads, for the check of the output files."""
    from .api import sidecar_path
    from .outputs import check_paths

    side = sidecar_path(model) if os.path.isfile(sidecar_path(model)) else None
    reads = [("the input model", model), ("the input model's .json sidecar", side), *_npy_files(input),
             *_npy_files(state, "--state")]
    check_paths(reads, [])
    if profile_ops and backend is not Backend.executor:
        raise InputError("--profile-ops times the embedded executor: it cannot be used with "
                         f"--backend {backend.value}")
    if backend is Backend.vgf:
        from .verify import vgf as vgf_backend

        vgf_backend.require()  # the SDK and a Vulkan device, or one line saying what to install
    if repeat < 1:
        raise InputError(f"--repeat {repeat}: give at least one run")
    return reads


def _random_input_sizes(m: Any, model: Path, given: dict[str, Any], input_shape: list[str] | None,
                        dim: list[str] | None) -> dict[str, tuple[int, ...]] | None:
    """The input shapes of ``run``'s random inputs: None for a static program run without --input-shape/--dim,
    else those of the given arrays, completed by the options for a symbolic program."""
    sizes: dict[str, tuple[int, ...]] | None = None
    if input_shape or dim or any(not v.type.is_static for v in m.graph.inputs):
        from .converter.specialize import bind_input_shapes

        if all(v.name in given for v in m.graph.inputs):
            sizes = {k: tuple(a.shape) for k, a in given.items()}
        else:  # the random inputs of a symbolic program take their sizes from the options and the given data
            known = {**parse_shapes(input_shape, str(model)), **{k: tuple(a.shape) for k, a in given.items()}}
            sizes, _ = bind_input_shapes(m.graph, known, parse_dims(dim, file=str(model)), file=str(model))
    return sizes


def _run_profiled(out: Out, m: Any, feed: dict[str, Any], repeat: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """``run --profile-ops``: the outputs and the time per op of the last of ``repeat`` runs in the executor (the
    tables printed unless --json or --quiet)."""
    from .executor import run as run_graph
    from .executor import run_with_profile

    for _ in range(repeat - 1):  # untimed: the profile is of the last run
        run_graph(m.graph, feed)
    outs, prof = run_with_profile(m.graph, feed)
    profile = _profile_summary(prof)
    if not (out.json or out.quiet):
        _print_profile(prof)
    return outs, profile


def _run_program(out: Out, m: Any, model: Path, feed: dict[str, Any], backend: Backend,
                 repeat: int) -> dict[str, Any]:
    """``run``: the outputs of the last of ``repeat`` runs on ``backend`` (a symbolic program warns once per size
    guard the inputs fall outside; an ERROR_IF names the file)."""
    if m.is_dynamic:  # sizes outside the conversion's guards: one warning per guard, in the result
        for w in m.guard_warnings(feed):
            out.warn_once(w)
    from .executor.registry import ExecutionError

    try:
        for _ in range(repeat):
            outs: dict[str, Any] = m.run(feed, backend=backend.value, check_guards=False)
    except ExecutionError as e:  # an ERROR_IF at these inputs (a symbolic program at a size it forbids)
        if e.file is not None:
            raise
        raise type(e)(e.message, op=e.op, tensor=e.tensor, file=str(model)) from None
    return outs


def _output_result(out: Out, name: str, arr: Any, output_dir: Path | None,
                   files: dict[str | os.PathLike[str], bytes]) -> dict[str, Any]:
    """``run``'s result line for one output (with --output-dir, its NAME.npy is added to ``files``); its JSON
    record."""
    lo = arr.min().item() if arr.size else 0
    hi = arr.max().item() if arr.size else 0
    out.result(f"{name}: shape={list(arr.shape)} dtype={arr.dtype} min={lo} max={hi}")
    file = output_dir / f"{name}.npy" if output_dir is not None else None
    if file is not None:
        files[file] = _npy(arr)
    return {"name": name, "shape": list(arr.shape), "dtype": str(arr.dtype), "min": lo, "max": hi,
            "file": str(file) if file else None}


def _output_results(out: Out, outs: dict[str, Any], output_dir: Path | None) -> list[dict[str, Any]]:
    """``run``'s result line per output, each written as NAME.npy with --output-dir (every file or none)."""
    files: dict[str | os.PathLike[str], bytes] = {}
    results = [_output_result(out, name, arr, output_dir, files) for name, arr in outs.items()]
    if output_dir is not None:
        from .outputs import write_files

        write_files(files, make_dirs=True)  # every output or none
    return results


def _output_arrays(m: Any, output_dir: Path, stream: bool) -> list[tuple[str, Path]]:
    """The files ``run --output-dir`` writes for the program ``m`` (``stream``: with --steps/--state, also each
    state variable's final value).  A name that is not a plain file name (one holding ``/`` or a NUL) is refused:
    the arrays stay inside the folder."""
    names = [v.name for v in m.graph.outputs]
    files = [(f"the output array {n!r}", f"{n}.npy") for n in names]
    if stream:
        files += [(f"the final state of {v.name!r}", f"state_{v.name}.npy") for v in m.state_variables]
    for what, name in files:
        if "/" in name or "\0" in name:
            raise InputError(f"{what} cannot be written to --output-dir {output_dir}: {name!r} is not a plain file "
                             "name", file=str(m.graph.source.file or "") or None)
    return [(what, output_dir / name) for what, name in files]


def _npy(arr: Any) -> bytes:
    import numpy as np

    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def _run_steps(m: Any, model: Path, given: dict[str, Any], steps: int, state: dict[str, Any],
               output_dir: Path | None, seed: int) -> dict[str, Any]:
    """``run --steps``: one session, ``steps`` invocations; outputs stacked along a leading step axis."""
    import numpy as np

    from .verify.stream import step_inputs

    out = _out()
    session = m.session()
    if state:
        session.state = state
    sets = step_inputs(m.graph, session, steps, given, seed, str(model))
    per_output: dict[str, list[Any]] = {n: [] for n in session.output_names}
    with _progress(f"run {model.name}") as prog:
        for k, s in enumerate(sets):
            prog(k, steps, f"step {k + 1}/{steps}")
            for name, arr in session.run(s).items():
                per_output[name].append(arr)
    out.result(f"{model}: {steps} step(s) of one stream"
               + (f", state carried in {len(session.variables)} variable(s)" if session.variables else ""))
    files: dict[str | os.PathLike[str], bytes] = {}
    results = [_output_result(out, name, np.stack(arrs), output_dir, files) for name, arrs in per_output.items()]
    final = []
    for name, arr in session.state.items():
        file = output_dir / f"state_{name}.npy" if output_dir is not None else None
        if file is not None:
            files[file] = _npy(arr)
        out.echo(f"  state {name}: shape={list(arr.shape)} dtype={arr.dtype}" + (f" -> {file}" if file else ""))
        final.append({"name": name, "shape": list(arr.shape), "dtype": str(arr.dtype),
                      "file": str(file) if file else None})
    if output_dir is not None:
        from .outputs import write_files

        write_files(files, make_dirs=True)  # every output or none
    return {"model": str(model), "seed": seed, "backend": "executor", "outputs": results, "profile": None,
            "steps": steps, "state": final}


def _state_facts(m: Any) -> list[dict[str, Any]]:
    return [{"variable": v.name, "type": str(v.type), "input": v.input, "output": v.output,
             "initial": v.initial is not None} for v in m.state_variables]


def _profile_summary(prof: dict[str, float]) -> dict[str, Any]:
    by_kind: dict[str, dict[str, Any]] = {}
    for key, t in prof.items():
        kind = key.split("#")[0]
        entry = by_kind.setdefault(kind, {"count": 0, "ms": 0.0})
        entry["count"] += 1
        entry["ms"] += t * 1e3
    return {"total_ms": sum(prof.values()) * 1e3, "by_kind": by_kind}


def _print_profile(prof: dict[str, float], top: int = 15) -> None:
    """Two rich tables on stdout: the time per op type (count, total, mean, share) and the slowest ops."""
    from rich.console import Console
    from rich.table import Table

    total = sum(prof.values()) or 1e-12
    summary = _profile_summary(prof)
    kinds = Table(title=f"time per op type (total {total * 1e3:.1f} ms)", title_justify="left")
    for col in ("op type", "count", "ms", "mean ms", "%"):
        kinds.add_column(col, justify="left" if col == "op type" else "right")
    for kind, e in sorted(summary["by_kind"].items(), key=lambda kv: -kv[1]["ms"]):
        kinds.add_row(kind, str(e["count"]), f"{e['ms']:.2f}", f"{e['ms'] / e['count']:.3f}",
                      f"{100 * e['ms'] / (total * 1e3):.1f}")
    slow = Table(title=f"slowest {min(top, len(prof))} ops", title_justify="left")
    slow.add_column("op")
    slow.add_column("ms", justify="right")
    for key, t in sorted(prof.items(), key=lambda kv: -kv[1])[:top]:
        slow.add_row(key, f"{t * 1e3:.2f}")
    console = Console(highlight=False)
    console.print(kinds)
    console.print(slow)


@app.command()
@_user_errors
def inspect(file: Path = typer.Argument(..., metavar="FILE", help="a .tosa file, or a model to convert first"),
            signature: str = SIGNATURE,
            target: TargetName | None = typer.Option(None, "--target", help=TARGET_HELP),
            io_: str = IO, npu_rounding: str = NPU_ROUNDING,
            unsafe_deserialization: bool = UNSAFE_DESERIALIZATION,
            trust_model: bool = TRUST_MODEL,
            max_extract_mb: int | None = MAX_EXTRACT,
            custom_objects: list[Path] | None = CUSTOM_OBJECTS,
            tag: str | None = TAG, inputs: list[str] | None = CUT_INPUTS, outputs: list[str] | None = CUT_OUTPUTS,
            json_: bool = JSON, quiet: bool = QUIET, verbose: bool = VERBOSE) -> dict[str, Any]:
    """Show the ops, tensors and the profiles/extensions a TOSA program needs (with --target, everything a target
    cannot take; for an --io int program, the scales and zero points of its integer inputs and outputs, from its
    .json sidecar)."""
    from .api import convert as do_convert
    from .api import load
    from .converter.tensorflow import is_tensorflow_source

    out = _out()
    from .converter.nnef import is_nnef_source

    listing = _saved_model_listing(out, file)
    if file.suffix == ".tflite" or is_nnef_source(str(file)) or is_tensorflow_source(str(file)):
        with _progress(f"convert {file.name}"), _quiet_deps():
            m = do_convert(str(file), ConvertOptions(signature=signature, io=io_, max_extract_mb=max_extract_mb,
                                                     npu_rounding=npu_rounding,
                                                     **_unsafe(unsafe_deserialization, trust_model),
                                                     **_custom_objects(custom_objects, file),
                                                     **_cut(tag, inputs, outputs), **_target(target)))
    else:
        _custom_objects(custom_objects, file)  # (refused for a .tosa)
        m = load(str(file))
    g = m.graph
    frontend = _frontend(g)
    version = g.record.specification_version or "1.0"
    symbolic = version != "1.0"
    file_version = g.record.tosa_version
    out.echo(f"{file}: TOSA {version}" + (f" (converted by the {frontend} frontend)" if frontend else "")
             + (f" (symbolic program; file version {file_version})" if symbolic and file_version else ""))
    layout = g.record.layout
    if layout:
        out.echo(f"layout:     {layout['transposes_before']} NCHW/NHWC transposes before the layout pass, "
                 f"{layout['transposes_after']} after")
    out.echo(f"profiles:   {', '.join(m.profiles) or '-'}")
    out.echo(f"extensions: {', '.join(m.extensions) or '-'}")
    out.echo("inputs:")
    for v in g.inputs:
        out.echo(f"  {v.name}: {_symbolic_type(v.type) if symbolic else v.type}")
    if symbolic:
        _echo_symbolic_dims(out, g)
    _echo_fixed_dims(out, g)
    out.echo("outputs:")
    for v in g.outputs:
        out.echo(f"  {v.name}: {_symbolic_type(v.type) if symbolic else v.type}")
    tensors = _tensor_facts(g) if symbolic else []
    if tensors:
        out.echo("tensors (symbolic shapes; ? where no name can be derived):")
        for t in tensors:
            value = f" = {t['value']}" if t.get("value") else ""
            out.echo(f"  {t['name']}: {t['type']}{value}  ({t['op']})")
    _echo_io_quantization(out, m)
    custom = _echo_ops(out, g)
    target_report = _echo_target(out, m, target) if target is not None else None
    state = _echo_state(out, m)
    return {"file": str(file), "format": f"TOSA {version}", "frontend": frontend, "layout": layout,
            **_model_facts(m), "custom_ops": custom, "inexact": g.inexact,
            "side_effect_ops": list(g.source.side_effect_ops), "target": target_report, "state": state,
            "dim_symbols": dict(g.dims.symbols) if symbolic else {},
            "dim_equalities": list(g.dims.equalities) if symbolic else [], "tensors": tensors,
            "dim_guards": list(g.dims.guards) if symbolic and g.dims.guards is not None else None,
            "dim_hints": dict(g.dims.hints) if symbolic and g.dims.hints is not None else None,
            "saved_model": listing}


def _echo_symbolic_dims(out: Out, g: Any) -> None:
    """``inspect`` of a symbolic program: its dimension symbols, the equalities it relies on and its size guards."""
    syms = g.dims.symbols
    if syms:
        out.echo("dimension symbols (bind them with specialize --dim SYMBOL=VALUE or --input-shape):")
        for sym, where in syms.items():
            out.echo(f"  {sym}: input {where['input']!r} dimension {where['dim']}")
    eqs = g.dims.equalities
    if eqs:
        out.echo("equalities the program relies on (checked at run time):")
        for e in eqs:
            rel = "broadcasts with" if e.get("broadcast") else "=="
            out.echo(f"  {e['a']} {rel} {e['b']}  ({e['op']})")
    guards = g.dims.guards
    if guards is None:
        out.echo("size guards: none known (a .tosa file cannot carry them; the .mlir written with it does)")
    elif guards:
        hints = ", ".join(f"{k}={v}" for k, v in (g.dims.hints or {}).items())
        out.echo(f"size guards (comparisons the conversion made at {hints or 'its sample sizes'}; run and "
                 "specialize warn outside them):")
        for text in guards:
            out.echo(f"  {text}")


def _echo_fixed_dims(out: Out, g: Any) -> None:
    """``inspect``: the model's unknown dimensions and the sizes the conversion fixed them to."""
    fixed = g.record.fixed_dims
    if fixed:
        out.echo("dimension symbols (unknown in the model; fixed with --input-shape NAME=DIMS or --dim SYMBOL=VALUE):")
        for e in fixed:
            out.echo(f"  {e['input']}: " + ", ".join(f"dim {d['dim']} {d['symbol']}={d['value']} ({d['from']})"
                                                     for d in e["dims"]))


def _echo_ops(out: Out, g: Any) -> list[str]:
    """``inspect``: the op counts, the inexact lowerings, the dropped side effects and the CUSTOM operators (whose
    names it returns)."""
    out.echo("ops:")
    for name, n in g.op_counts().items():
        out.echo(f"  {name:28s} {n}")
    for e in g.inexact:
        out.echo(f"inexact lowering: {e['op']} ({e['tensor']}): {e['reason']}")
    for e in g.source.side_effect_ops:  # (TensorFlow sources: ops the program leaves out)
        out.echo(f"dropped side effect: tf.{e['op']} ({e['node']}): {e['what']}")
    custom = _custom_ops(g)
    if custom:
        out.echo(f"partial graph: {len(custom)} CUSTOM operator(s) stand for ops that could not be lowered "
                 f"(the executor and the reference model cannot run them):")
        for name in custom:
            out.echo(f"  {name}")
    return custom


def _echo_target(out: Out, m: Any, target: TargetName) -> dict[str, Any]:
    """``inspect --target``: everything the target cannot take; returns the report's JSON object."""
    problems = m.check_target(target.value)
    if problems:
        out.echo(f"target {target.value}: {len(problems)} thing(s) it cannot take:")
        for p in problems:
            out.echo(f"  {p}")
    else:
        out.echo(f"target {target.value}: takes the program")
    return {"name": target.value, "ok": not problems, "problems": [p.to_dict() for p in problems]}


def _echo_state(out: Out, m: Any) -> list[dict[str, Any]]:
    """``inspect``: the state the program keeps across invocations (EXT-VARIABLE, or --state-io inputs and
    outputs); returns its facts."""
    state = _state_facts(m)
    if state:
        out.echo("state (kept across invocations):")
        for st in state:
            how = (f"input {st['input']} -> output {st['output']}" if st["input"] else "EXT-VARIABLE")
            out.echo(f"  {st['variable']}: {st['type']}: {how}")
    return state


def _saved_model_listing(out: Out, file: Path) -> list[dict[str, Any]] | None:
    """A SavedModel directory's MetaGraphs (tag sets) and each one's signatures with their inputs and outputs,
    printed before it is converted (so they show even when the conversion fails); None for anything else."""
    if not (file.is_dir() and ((file / "saved_model.pb").exists() or (file / "saved_model.pbtxt").exists())):
        return None
    from .converter.tensorflow import saved_model_listing

    with _quiet_deps():
        listing = saved_model_listing(str(file))
    out.echo(f"{file}: SavedModel, {len(listing)} MetaGraph(s) (choose with --tag and --signature):")
    for mg in listing:
        out.echo(f"  tags {','.join(mg['tags']) or '(none)'}: {len(mg['signatures'])} signature(s)")
        for key, sig in mg["signatures"].items():
            out.echo(f"    {key} ({sig['method'] or '-'})")
            for role in ("inputs", "outputs"):
                for k, t in sig[role].items():
                    shape = "?" if t["shape"] is None else "[" + ", ".join("?" if d < 0 else str(d)
                                                                          for d in t["shape"]) + "]"
                    out.echo(f"      {role[:-1]:6s} {k}: {t['dtype']}{shape} ({t['tensor']})")
    return listing


def _symbolic_type(t: Any) -> str:
    """``[batch, 16, 16, 3] fp32``: a tensor type with its dimension symbols, or ``!shape<4>`` for a shape value."""
    if t.dtype.value == "shape":
        return f"!shape<{t.shape[0] if t.shape else '?'}>"
    return "[" + ", ".join(str(d) for d in t.shape) + f"] {t.dtype.value}"


def _tensor_facts(g: Any) -> list[dict[str, Any]]:
    """Every value an operator of ``g`` computes (constants aside), with its symbolic shape (and, for a shape value,
    what it computes), in program order."""
    rows = []
    values = g.dims.shape_values
    for op in g.topological_order():
        if op.opcode in ("CONST", "CONST_SHAPE"):
            continue
        for r in op.results:
            rows.append({"name": r.name, "op": op.opcode, "shape": list(r.type.shape), "dtype": r.dtype.value,
                         "type": _symbolic_type(r.type), "value": values.get(r.name)})
    return rows


def _frontend(g: Any) -> str | None:
    """The frontend that made ``g`` (None for a .tosa read back)."""
    return {"nnef": "NNEF", "tflite": "TFLite", "tensorflow": "TensorFlow"}.get(g.source.format or "")


@app.command()
@_user_errors
def verify(model: Path = typer.Argument(..., metavar="MODEL",
                                        help="the model: .tflite, NNEF (dir, .tgz, graph.nnef), SavedModel dir, "
                                         ".keras, .h5 or frozen .pb"),
           input_shape: list[str] | None = typer.Option(None, "--input-shape", metavar="NAME=DIMS",
                                                        help="NAME=1,224,224,3"),
           dim: list[str] | None = typer.Option(None, "--dim", metavar="SYMBOL=VALUE",
                                                help="size of every unknown dimension named SYMBOL (repeatable)"),
           input: list[str] | None = INPUT_NPY,
           num: int = typer.Option(3, help="number of random input sets"),
           seed: int = typer.Option(0, help="seed of the random inputs"),
           oracle: str | None = ORACLE,
           reference: bool | None = typer.Option(None, "--reference-kernels", hidden=True,
                                                 help="deprecated: --oracle ref (now the default)"),
           rounding: str = typer.Option("double", "--rounding", metavar="double|single", help="double or single"),
           signature: str = SIGNATURE,
           hybrid: str = typer.Option("kernel", "--hybrid", metavar="kernel|dequantize",
                                      help="int8-weight float models: kernel (LiteRT's hybrid kernels) or dequantize"),
           nnef_reference: Path | None = typer.Option(None, "--reference", metavar="M.TFLITE",
                                                      help="NNEF models: the .tflite the model was converted from, "
                                                      "run in LiteRT as the oracle (default: the executor's fp64 "
                                                      "evaluation)"),
           io_: str = IO, npu_rounding: str = NPU_ROUNDING,
           layers: bool = typer.Option(False, "--layers", help="also compare every layer with LiteRT and name the "
                                       "first diverging one (.tflite only)"),
           report_html: Path | None = typer.Option(None, "--report", metavar="PATH",
                                                   help="write an HTML report here: error "
                                                   "distribution, worst elements, bounds (and the per-layer plot "
                                                   "with --layers)"),
           layers_html: Path | None = typer.Option(None, "--layers-html", metavar="PATH",
                                                   help="write the per-layer error plot here"),
           layers_png: Path | None = typer.Option(None, "--layers-png", metavar="PATH",
                                                  help="also a PNG of it (headless Chromium)"),
           backend: Backend = typer.Option(Backend.executor, "--backend",
                                       help="iree: also compile the MLIR with IREE, run it on the first input set "
                                       "and report its agreement with the executor (the executor stays the oracle); "
                                       "vgf: the same with the VGF on a Vulkan device (Arm's ML SDK for Vulkan)"),
           steps: int | None = typer.Option(None, "--steps", metavar="N",
                                            help="compare N consecutive invocations of one stream, step by step, "
                                            "with LiteRT's interpreter invoked N times (TensorFlow called N times "
                                            "for a SavedModel with --keep-variables; --input NAME=frames.npy: "
                                            "the frames, leading axis the step)"),
           state_io: bool = STATE_IO,
           keep_variables: list[str] | None = KEEP_VARIABLES,
           trust_model: bool = TRUST_MODEL,
           max_extract_mb: int | None = MAX_EXTRACT,
           unsafe_deserialization: bool = UNSAFE_DESERIALIZATION,
           custom_objects: list[Path] | None = CUSTOM_OBJECTS,
           tag: str | None = TAG, inputs: list[str] | None = CUT_INPUTS, outputs: list[str] | None = CUT_OUTPUTS,
           json_: bool = JSON, quiet: bool = QUIET, verbose: bool = VERBOSE,
           ) -> dict[str, Any]:
    """Convert MODEL and compare the executor with its source runtime (LiteRT's reference kernels for .tflite,
    TensorFlow for SavedModel/Keras/GraphDef), reporting each output's error and the bound it was judged by."""
    from .api import convert as do_convert

    out = _out()
    per_layer = bool(layers or layers_html or layers_png)
    oracle = _verify_preflight(out, model, input, nnef_reference, (report_html, layers_html, layers_png),
                               reference=reference, oracle=oracle, backend=backend, steps=steps, io_=io_,
                               per_layer=per_layer)
    with _progress(f"verify {model.name}") as prog, _quiet_deps():
        prog(0, 0, "converting")
        m = do_convert(str(model), ConvertOptions(
            input_shapes=parse_shapes(input_shape, str(model)), dims=parse_dims(dim, file=str(model)),
            rounding=rounding, signature=signature, state_io=state_io, io=io_, hybrid=hybrid,
            npu_rounding=npu_rounding, max_extract_mb=max_extract_mb, **_keep_variables(keep_variables),
            **_unsafe(unsafe_deserialization, trust_model), **_custom_objects(custom_objects, model),
            **_cut(tag, inputs, outputs)))
        report, sets = _verify_compare(m, model, _load_inputs(input), prog, steps=steps, seed=seed, num=num,
                                       oracle=oracle, nnef_reference=nnef_reference, trust_model=trust_model)
        layer_report = _layer_report(m, model, report, seed, (layers_html, layers_png), prog) if per_layer else None
        backend_rows = _backend_rows(m, backend, sets, seed, prog)
    _print_verify(out, m, report, backend, backend_rows, layer_report, (layers_html, layers_png), report_html)
    return {"model": str(model), "report": report.to_dict(),
            "backend": None if backend_rows is None else {"name": backend.value,
                                                          "agree": all(r["ok"] for r in backend_rows),
                                                          "outputs": backend_rows},
            "layers": layer_report.to_dict() if layer_report is not None else None,
            "html": str(report_html) if report_html else None}


def _layer_report(m: Any, model: Path, report: Any, seed: int, pages: tuple[Path | None, Path | None],
                  prog: Any) -> Any:
    """``verify --layers``: every layer compared with LiteRT (and the plot pages written)."""
    from .verify.layers import verify_layers

    layers_html, layers_png = pages
    prog(0, 0, "comparing every layer")
    return verify_layers(str(model), seed=seed, graph=m.graph, reference_kernels=report.oracle == "ref",
                         out_html=str(layers_html) if layers_html else None,
                         out_png=str(layers_png) if layers_png else None)


def _verify_preflight(out: Out, model: Path, input: list[str] | None, nnef_reference: Path | None,
                      pages: tuple[Path | None, Path | None, Path | None], *, reference: bool | None,
                      oracle: str | None, backend: Backend, steps: int | None, io_: str, per_layer: bool) -> str | None:
    """``verify``'s checks before any work (paths, runtimes, flags that do not combine); returns the oracle."""
    from .outputs import check_paths

    report_html, layers_html, layers_png = pages
    png_page = layers_png.with_suffix(".html") if layers_png is not None and layers_html is None else None
    check_paths([("the input model", model), ("the --reference model", nnef_reference), *_npy_files(input)],
                [("the --report page", report_html), ("the --layers-html page", layers_html),
                 ("the --layers-png image", layers_png), ("the page of the --layers-png image", png_page)])
    if reference is not None:
        out.info("note: --reference-kernels is deprecated; the reference kernels are the default (--oracle ref)")
        oracle = oracle or ("ref" if reference else "optimized")
    tflite = _is_tflite(model)
    if tflite:
        from .verify.compare import require_litert

        require_litert()
    if backend is Backend.vgf:
        from .verify import vgf as vgf_backend

        vgf_backend.require()  # the SDK and a Vulkan device, or one line saying what to install
    if per_layer and not tflite:
        raise InputError(f"{model}: per-layer comparison needs a .tflite file")
    if steps is not None and per_layer:
        raise InputError("--layers compares one invocation; it does not combine with --steps")
    if per_layer and io_ == "int":
        raise InputError(f"{model}: per-layer comparison is not available with --io int yet")
    return oracle


def _verify_compare(m: Any, model: Path, loaded: dict[str, Any], prog: Any, *, steps: int | None, seed: int,
                    num: int, oracle: str | None, nnef_reference: Path | None,
                    trust_model: bool) -> tuple[Any, list[dict[str, Any]] | None]:
    """``verify``'s comparison with the source runtime (``--steps``: step by step); the report and the input sets
    given (None: seeded random ones)."""
    given = _check_inputs(m, loaded)
    sets = None
    if steps is not None:
        return m.verify_steps(steps, given, seed=seed, oracle=oracle, progress=prog, trust_model=trust_model), sets
    if given:
        from .verify.compare import random_inputs

        sets = [{**random_inputs(m.graph, seed), **given}]
    if nnef_reference is not None and m.graph.source.format != "nnef":
        raise InputError(f"{model}: --reference is for NNEF models (other sources carry their runtime)")
    report = m.verify(sets, seed=seed, num=num, oracle=oracle, progress=prog,
                      reference=str(nnef_reference) if nnef_reference is not None else None,
                      trust_model=trust_model)
    return report, sets


def _backend_rows(m: Any, backend: Backend, sets: list[dict[str, Any]] | None, seed: int,
                  prog: Any) -> list[dict[str, Any]] | None:
    """``--backend iree|vgf``: its agreement with the executor on the first input set (None for the executor)."""
    if backend is Backend.executor:
        return None
    from .verify.compare import random_inputs

    prog(0, 0, f"running in {_BACKEND_NAMES[backend]}")
    first = sets[0] if sets else random_inputs(m.graph, seed)
    rows: list[dict[str, Any]] = m.backend_agreement(first, backend.value)
    return rows


def _print_verify(out: Out, m: Any, report: Any, backend: Backend, backend_rows: list[dict[str, Any]] | None,
                  layer_report: Any, layer_pages: tuple[Path | None, Path | None], report_html: Path | None) -> None:
    """``verify``'s report: the conversion's warnings, the comparison, the backend's agreement, the per-layer
    summary, the HTML page; sets the exit code of a failed verification."""
    for w in m.graph.record.warnings:
        out.warn_once(str(w))
    _print_report(out, report)
    if backend_rows is not None:
        agree = all(r["ok"] for r in backend_rows)
        detail = "; ".join(f"{r['name']}: " + (f"{r['mismatches']} mismatches" if r["mismatches"] is not None
                                                else f"max err {r['max_abs_err']:.3g} (bound {r['bound']:.3g})")
                           for r in backend_rows)
        out.result(f"{_BACKEND_NAMES[backend]} vs executor on the first input: {'agree' if agree else 'DISAGREE'} "
                   f"({detail})")
        if not agree:
            out.exit_code = EXIT_VERIFY
    if layer_report is not None:
        out.result(layer_report.summary())
        for p in layer_pages:
            if p:
                out.echo(f"  wrote {p}")
    if report_html is not None:
        from .api import atomic_write
        from .verify.verify_html import render_verify_html

        atomic_write(report_html, render_verify_html(report, layer_report).encode("utf-8"))
        out.echo(f"wrote {report_html}")
    if not report.ok or (layer_report is not None and layer_report.first_divergent is not None):
        out.exit_code = EXIT_VERIFY


@app.command()
@_user_errors
def zoo(list_: bool = typer.Option(False, "--list", help="list the selected model variants; build nothing"),
        filter: str | None = typer.Option(None, "--filter", metavar="PATTERNS",
                                          help="comma-separated patterns: model, model/variant, "
                                          "/variant, family, shell wildcards; !pattern excludes"),
        jobs: int = typer.Option(1, "--jobs", "-j", help="parallel worker processes"),
        report: Path | None = typer.Option(None, "--report", metavar="DIR", help="folder for zoo.json/zoo.md/zoo.html "
                                           "(default out/zoo)"),
        models: Path | None = typer.Option(None, "--models", metavar="DIR", help="folder holding the model "
                                           "definitions (models/ of a tf2tosa checkout; default: this checkout)"),
        cluster: str | None = typer.Option(None, "--cluster", metavar="ADDRESS", help="run one job per model "
                                           "variant on the Dask scheduler at ADDRESS (tcp://host:8786; needs "
                                           "tf2tosa[cluster]) instead of local processes"),
        json_: bool = JSON, quiet: bool = QUIET, verbose: bool = VERBOSE,
        ) -> dict[str, Any]:
    """Run the model-zoo regression suite: build, convert, validate, run and compare every model variant."""
    from .zoo import zoo_command

    out = _out()
    runs: list[Any] = []
    code = zoo_command(list_only=list_, filter=filter, jobs=jobs, report=str(report) if report else None,
                       echo=out.echo, on_run=runs.append, models=str(models) if models else None, cluster=cluster)
    run_ = runs[0] if runs else None
    results = [] if run_ is None else [
        {"model": r.get("model"), "variant": r.get("variant"), "family": r.get("family"),
         "status": r.get("status", "LISTED" if list_ else None), "reason": r.get("reason", "")}
        for r in run_.results]
    if code:
        out.exit_code = EXIT_VERIFY
    return {"list": list_, "results": results, "summary": None if list_ or run_ is None else run_.summary(),
            "paths": {} if run_ is None else {k: str(p) for k, p in run_.paths.items()}}


@app.command()
@_user_errors
def ops(json_: bool = JSON, quiet: bool = QUIET, verbose: bool = VERBOSE) -> dict[str, Any]:
    """Print the op-support table generated from the legalization registry."""
    from .support import support_rows, support_table

    _out().echo(support_table())
    rows = [{"op": name, "dtypes": status, "lowering": doc} for name, status, doc in support_rows()]
    return {"count": len(rows), "ops": rows}


@app.command()
@_user_errors
def demo(out_dir: Path = typer.Option(Path("out/demo"), "--out-dir", metavar="DIR",
                                      help="where to write the .tosa files"),
         samples: Path | None = typer.Option(None, "--samples", metavar="DIR", help="folder of sample .tflite models"),
         json_: bool = JSON, quiet: bool = QUIET, verbose: bool = VERBOSE) -> dict[str, Any]:
    """Convert and verify the bundled sample models (against LiteRT's reference kernels)."""
    from .api import convert as do_convert
    from .verify.compare import require_litert

    out = _out()
    require_litert()
    # the checkout's samples (an editable install), else ./models/samples (run from a clone after `pip install .`)
    here = Path(__file__).resolve().parent.parent / "models" / "samples"
    folder = samples or (here if here.is_dir() else Path("models") / "samples")
    models = sorted(folder.glob("*.tflite"))
    if not models:
        raise InputError(f"no sample models in {folder}")
    out_dir.mkdir(parents=True, exist_ok=True)
    failed = 0
    rows = []
    for path in models:
        t0 = time.perf_counter()
        m = do_convert(str(path))
        dest = out_dir / (path.stem + ".tosa")
        m.save(dest, mlir=dest.with_suffix(".mlir"))
        report = m.verify(num=3)
        status = "PASS" if report.ok else "FAIL"
        failed += not report.ok
        worst = max((o.rel for o in report.outputs), default=0.0)
        mism = sum(o.mismatches for o in report.outputs)
        out.echo(f"{status}  {path.name:32s} -> {dest}  {ops_text(m.graph.ops.values())}  rel_err={worst:.2e}  "
                 f"mismatches={mism}  {time.perf_counter() - t0:.2f}s")
        for line in report.info:
            out.echo(f"      info: {line}")
        rows.append({"model": str(path), "output": str(dest), "report": report.to_dict()})
    if failed:
        out.exit_code = EXIT_VERIFY
        typer.echo(f"{failed} of {len(models)} sample models failed verification", err=True)
    else:
        out.result(f"all {len(models)} sample models converted and verified against LiteRT's reference kernels")
    return {"models": rows}
