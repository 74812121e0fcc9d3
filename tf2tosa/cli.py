"""The ``tf2tosa`` command line.

Every command takes ``--json`` (one JSON object on stdout, see docs/schemas/), ``-q/--quiet`` and
``-v/--verbose``.  Exit codes: 0 ok, 1 user error, 2 usage error, 3 verification failed, 130 interrupted.

This module registers ``convert`` and runs the app (:func:`main`); what the commands share is :mod:`.cli_base`, the
other commands are :mod:`.cli_commands`, imported only when one of them runs (:func:`app_for`).
"""

from __future__ import annotations

import copy
import gc
import os
import sys
import time
from collections.abc import Sequence
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
    _reader_gone,
    _target,
    _unsafe,
    _user_errors,
    parse_dims,
    parse_shapes,
)
from .cli_base import app as _app
from .cli_output import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    EXIT_VERIFY,
    Out,
    op_counts,
    ops_text,
)
from .errors import ConversionError, InputError
from .options import ConvertOptions

# convert's own options (the ones several commands share are in cli_base)
CONVERT_MODEL = typer.Argument(..., metavar="MODEL",
                               help="the model: .tflite, NNEF (dir, .tgz, graph.nnef), SavedModel dir, "
                               ".keras, .h5 or frozen .pb")
OUTPUT = typer.Option(..., "-o", "--output", metavar="PATH", help="the .tosa file to write")
MLIR = typer.Option(None, "--mlir", metavar="PATH", help="also write TOSA-dialect MLIR text here")
VGF = typer.Option(None, "--vgf", metavar="PATH",
                   help="also write the VGF (Vulkan Graph Format) that Arm's model "
                   "converter makes of the .tosa here, with it as a set (needs Arm's ML "
                   "SDK for Vulkan: `make vgf`)")
MLIR_SYNTAX = typer.Option(MlirSyntax.generic, "--mlir-syntax",
                           help="syntax of the --mlir text: generic (MLIR's generic operation "
                           "form; tosa-opt and IREE read it) or upstream (today's upstream TOSA "
                           "dialect assembly with keyword attributes; IREE reads it, tosa-opt "
                           "2026.8.0 does not)")
CONVERT_INPUT_SHAPE = typer.Option(None, "--input-shape", metavar="NAME=DIMS", help="NAME=1,224,224,3 (repeatable)")
CONVERT_DIM = typer.Option(None, "--dim", metavar="SYMBOL=VALUE",
                           help="size of every unknown dimension named SYMBOL (batch, d1 …: "
                           "`inspect` lists them; repeatable)")
DYNAMIC = typer.Option(False, "--dynamic", help="keep the unknown dimensions left open (after "
                       "--dim/--input-shape) symbolic: a TOSA 1.1-draft program with ? "
                       "dimensions and EXT-SHAPE ops computing the shapes (.tosa in the 1.1.0d "
                       "schema; -o X.mlir writes MLIR text only)")
HINT = typer.Option(None, "--hint", metavar="SYMBOL=VALUE",
                    help="with --dynamic: the sample size a symbol takes while "
                    "converting (default: batch 3, others 401/402/400); the program "
                    "stays symbolic (repeatable)")
VERIFY = typer.Option(False, "--verify/--no-verify", help="then compare with LiteRT / TensorFlow "
                      "on random inputs (needs the [tf] extra)")
CONVERT_SIGNATURE = typer.Option("serving_default", "--signature", help="SavedModel signature to convert")
QAT = typer.Option("auto", "--qat", metavar="auto|int8|float",
                   help="FakeQuant (QAT) models: auto (integer when FakeQuants "
                   "cover the graph), int8, or float (float emulation)")
QAT_IO = typer.Option("float", "--qat-io", metavar="float|int8",
                      help="integer QAT graphs: float inputs/outputs "
                      "(QUANTIZE/DEQUANTIZE) or int8")
CUSTOM_OPS = typer.Option(False, "--custom-ops", help="emit ops that cannot be lowered as TOSA "
                          "CUSTOM operators instead of failing")
MAX_UNROLL = typer.Option(None, "--max-unroll", metavar="N",
                          help="unroll WHILE loops with a static trip count up to this many "
                          "iterations (0: emit WHILE_LOOP; default 1024, but a loop running "
                          "hybrid int8-weight ops stays a WHILE_LOOP unless this is given)")
CONVERT_ROUNDING = typer.Option("double", "--rounding", metavar="double|single",
                                help="requantization rounding: double (TFLite-exact, EXT-DOUBLEROUND) "
                                     "or single (PRO-INT only)")
CONVERT_TARGET = typer.Option(None, "--target", help=TARGET_HELP + "; convert fails "
                              "(writing nothing) when there is any. For ethos-u85 / ethos-u55 convert "
                              "also picks the exact forms Vela runs cheapest (dilation above 2, int8 "
                              "softmax, int8 transposed convolution)")
FP16_WEIGHTS = typer.Option("keep", "--fp16-weights", metavar="keep|expand",
                            help="float16 weights: keep (fp16 constants + CAST, the file stays "
                                 "the source's size) or expand (fp32 constants)")
CONVERT_HYBRID = typer.Option("kernel", "--hybrid", metavar="kernel|dequantize",
                              help="int8-weight float models (dynamic-range quantization): kernel "
                                   "(LiteRT's hybrid kernels) or dequantize (float weights, inexact)")


@_app.command()
@_user_errors
def convert(model: Path = CONVERT_MODEL, output: Path = OUTPUT, mlir: Path | None = MLIR, vgf: Path | None = VGF,
            mlir_syntax: MlirSyntax = MLIR_SYNTAX,
            input_shape: list[str] | None = CONVERT_INPUT_SHAPE, dim: list[str] | None = CONVERT_DIM,
            dynamic: bool = DYNAMIC, hint: list[str] | None = HINT,
            verify: bool = VERIFY, oracle: str | None = ORACLE,
            signature: str = CONVERT_SIGNATURE, qat: str = QAT, qat_io: str = QAT_IO,
            custom_ops: bool = CUSTOM_OPS, max_unroll: int | None = MAX_UNROLL,
            rounding: str = CONVERT_ROUNDING, target: TargetName | None = CONVERT_TARGET,
            fp16_weights: str = FP16_WEIGHTS, hybrid: str = CONVERT_HYBRID, npu_rounding: str = NPU_ROUNDING,
            state_io: bool = STATE_IO, io_: str = IO, keep_variables: list[str] | None = KEEP_VARIABLES,
            max_extract_mb: int | None = MAX_EXTRACT, trust_model: bool = TRUST_MODEL,
            unsafe_deserialization: bool = UNSAFE_DESERIALIZATION, custom_objects: list[Path] | None = CUSTOM_OBJECTS,
            tag: str | None = TAG, inputs: list[str] | None = CUT_INPUTS, outputs: list[str] | None = CUT_OUTPUTS,
            json_: bool = JSON, quiet: bool = QUIET, verbose: bool = VERBOSE,
            ) -> dict[str, Any]:
    """Convert MODEL to a TOSA 1.0 flatbuffer (and with --verify, prove it)."""
    from .api import convert as do_convert

    out = _out()
    _convert_preflight(model, (output, mlir, vgf), io_=io_, dynamic=dynamic, verify=verify)
    t0 = time.perf_counter()
    with _progress(f"convert {model.name}") as prog, _quiet_deps():
        prog(0, 3 if verify else 2, "legalizing")
        more = {**_keep_variables(keep_variables), **_unsafe(unsafe_deserialization, trust_model),
                **_custom_objects(custom_objects, model), **_cut(tag, inputs, outputs)}
        _check_dynamic_flags(dynamic, hint, verify, target)
        options = ConvertOptions(input_shapes=parse_shapes(input_shape, str(model)),
                                 dims=parse_dims(dim, file=str(model)), rounding=rounding, signature=signature,
                                 qat=qat, qat_io=qat_io, custom_ops=custom_ops, max_unroll=max_unroll,
                                 fp16_weights=fp16_weights, hybrid=hybrid, state_io=state_io, io=io_,
                                 npu_rounding=npu_rounding,
                                 max_extract_mb=max_extract_mb, dynamic=dynamic,
                                 hints=parse_dims(hint, "--hint", str(model)) if dynamic else None, **more,
                                 **_target(target))
        m = do_convert(str(model), options)
        if target is not None:
            m.require_target(target.value)
        if verify and m.tf_source is not None:
            from .verify.tf_verify import check_trusted

            check_trusted(m.tf_source, trust_model)  # before writing: a refused --verify leaves nothing behind
        # with --verify the outputs are written once the program passes: a failed verification writes nothing
        deferred = verify and not _custom_ops(m.graph)
        if not deferred:
            prog(1, 2, "writing")
            m.save(output, mlir=mlir, mlir_syntax=mlir_syntax.value, vgf=vgf)
    ops = op_counts(m.graph.ops.values())[0]
    seconds = time.perf_counter() - t0
    wrote = (f"wrote {output} ({ops_text(m.graph.ops.values())}; profiles {', '.join(m.profiles) or '-'}; "
             f"extensions {', '.join(m.extensions) or '-'}) in {seconds:.2f}s")
    if not deferred:
        out.result(wrote)
    _print_conversion_notes(out, m, output)
    custom = _custom_ops(m.graph)
    payload: dict[str, Any] = {"input": str(model), "output": str(output), "mlir": str(mlir) if mlir else None,
                               "vgf": str(vgf) if vgf else None,
                               "ops": ops, **_model_facts(m), "custom_ops": custom, "seconds": round(seconds, 3),
                               "verify": None, "verify_skipped": None, "layout": m.graph.record.layout}
    if custom:
        out.warn(f"{len(custom)} op(s) kept as TOSA CUSTOM operators (not runnable): {', '.join(sorted(set(custom)))}")
        if verify:
            payload["verify_skipped"] = "the graph contains CUSTOM operators"
            out.info("verify skipped: the graph contains CUSTOM operators")
            return payload
    if verify:
        payload["verify"] = _verify_then_save(out, m, model, (output, mlir, vgf), mlir_syntax, wrote, oracle=oracle,
                                              trust_model=trust_model)
    return payload


def _convert_preflight(model: Path, paths: tuple[Path, Path | None, Path | None], *, io_: str, dynamic: bool,
                       verify: bool) -> None:
    """``convert``'s checks before any work: nothing overwrites an input or another output, and the tools that
    --vgf and --verify need are there (or one line says what to install)."""
    from .api import sidecar_path
    from .outputs import check_paths

    output, mlir, vgf = paths
    check_paths([("the input model", model)],  # before any work: nothing overwrites an input or another output
                [("the -o output", output), ("the --mlir output", mlir), ("the --vgf output", vgf),
                 ("the --io int .json sidecar", sidecar_path(output) if io_ == "int" else None)])
    if vgf is not None:
        from .verify import vgf as vgf_backend

        if dynamic:
            raise InputError("--vgf: a VGF is made of a static program; it does not combine with --dynamic")
        vgf_backend.require_sdk()  # the model converter, or one line saying what to install
    if verify and _is_tflite(model):
        from .verify.compare import require_litert

        require_litert()  # fail before the work, with the one-line hint


def _check_dynamic_flags(dynamic: bool, hint: list[str] | None, verify: bool, target: TargetName | None) -> None:
    """--hint needs --dynamic, and --dynamic does not combine with --verify or --target yet."""
    if hint and not dynamic:
        raise InputError("--hint sets a sample size of a symbol kept by --dynamic; without --dynamic use --dim")
    if dynamic and (verify or target is not None):
        raise InputError("--dynamic: not yet with --verify or --target")


def _print_conversion_notes(out: Out, m: Any, output: Path) -> None:
    """What ``convert`` tells after the result line: fixed and symbolic dimensions, the layout pass, where an --io int
    program's scales went, and the conversion's warnings."""
    from .converter.passes.input_shapes import fixed_dims_lines

    for line in fixed_dims_lines(m.graph.record.fixed_dims):
        out.result(line)
    for sym, where in m.graph.dims.symbols.items():
        out.result(f"symbolic: {sym} (input {where['input']!r} dimension {where['dim']}), TOSA 1.1 draft")
    layout = m.graph.record.layout
    if layout:
        out.info(f"layout: {layout['transposes_before']} NCHW/NHWC transposes before the layout pass, "
                 f"{layout['transposes_after']} after")
    if m.io_quantization:
        from .api import sidecar_path

        out.info(f"integer I/O: scales and zero points in {sidecar_path(output)}")
    for w in m.graph.record.warnings:
        out.warn_once(str(w))


def _verify_then_save(out: Out, m: Any, model: Path, paths: tuple[Path, Path | None, Path | None],
                      mlir_syntax: MlirSyntax, wrote: str, *, oracle: str | None, trust_model: bool) -> Any:
    """``convert --verify``: compare the program with its source runtime, then write the outputs only if it
    passes (a failed verification writes nothing and sets the exit code); returns the report as a dict."""
    output, mlir, vgf = paths
    unwritten = ", ".join(str(p) for p in (output, mlir, vgf) if p is not None)
    with _progress(f"verify {model.name}") as prog, _quiet_deps():
        try:
            report = m.verify(oracle=oracle, progress=prog, trust_model=trust_model)
        except ConversionError as e:  # the one error line says that nothing was written
            ConversionError.__init__(e, f"{e.message} ({unwritten} not written: verification failed)",
                                     file=e.file, op=e.op, tensor=e.tensor)
            raise
    _print_report(out, report)
    result = report.to_dict()
    if not report.ok:
        out.exit_code = EXIT_VERIFY
        out.warn(f"{unwritten} not written: verification failed")
    else:
        m.save(output, mlir=mlir, mlir_syntax=mlir_syntax.value, vgf=vgf)
        out.result(wrote)
    return result


def _command_name(info: Any) -> str:
    """The name typer gives a registered command (its own, else its function's, ``_`` as ``-``)."""
    return str(info.name or info.callback.__name__.lower().replace("_", "-"))


#: the commands this module registers (every other one is registered by :mod:`.cli_commands`, imported when it runs)
_HERE = frozenset({"convert"})


def _whole_app() -> typer.Typer:
    """:data:`app` with every command registered: :mod:`.cli_commands` imported."""
    from . import cli_commands  # noqa: F401  (its commands register themselves on the app)

    return _app


def __getattr__(name: str) -> Any:
    if name == "app":  # the whole app (typer's CliRunner, the tests): not bound here, so that importing the command
        return _whole_app()  # line for `convert` does not load the other commands
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def app_for(args: Sequence[str]) -> typer.Typer:
    """The app that runs ``args``: when they start with a command's name, a copy of :data:`app` that registers that
    command alone, else :data:`app`.  Typer builds the click command of every registered command (each option's
    parameter, its type, its help) on every run; the one that runs is enough (``tf2tosa convert``: 5 ms instead of
    11, and about 0.5 MB less peak memory).  ``convert`` does not import the other commands (:mod:`.cli_commands`,
    ~0.2 MB).  Shell completion (``_TF2TOSA_COMPLETE``) always gets the whole app."""
    if not args or "_TF2TOSA_COMPLETE" in os.environ:
        return _whole_app()
    whole = _app if args[0] in _HERE else _whole_app()
    chosen = [c for c in whole.registered_commands if _command_name(c) == args[0]]
    if len(chosen) != 1:
        return whole
    one = copy.copy(whole)
    one.registered_commands = chosen
    return one


def main(argv: Sequence[str] | None = None) -> None:
    """The console entry point: runs the app and turns usage errors into exit code 2 (a JSON object with
    ``--json``)."""
    try:  # typer >= 0.20 vendors click
        from typer._click.exceptions import UsageError
    except ImportError:  # pragma: no cover
        from click.exceptions import UsageError  # type: ignore[no-redef,assignment]

    args = list(sys.argv[1:] if argv is None else argv)
    if argv is None:  # this process's own entry point (the console script, python -m tf2tosa)
        # the objects of the modules imported so far live as long as the process: the cyclic collector need not walk
        # them again on every collection of the command's own garbage (which it still collects)
        gc.freeze()
        # and a conversion allocates graph objects by the hundred thousand: a young generation of 20,000 instead of
        # 700 collects the same garbage in far fewer passes (MobileNetV2 int8: about 10% of the conversion in
        # process, the same peak memory).  Those objects mostly live to the end of ``convert`` (the graph): each
        # young collection walks them once for little garbage, so ``convert`` collects only every 200,000 (an
        # op-heavy int8 model of ~2,700 TOSA ops, NASNetMobile: no collection instead of six, ~11 ms of 0.5 s, the
        # same peak memory; a float model's large constants are not held by cycles: no collection either way)
        gc.set_threshold(200_000 if args[:1] == ["convert"] else 20_000, 50, 100)
    try:
        code = app_for(args)(args=args, prog_name="tf2tosa", standalone_mode=False)
    except UsageError as e:
        if "--json" in args:
            cmd = next((a for a in args if not a.startswith("-")), "tf2tosa")
            Out(cmd, json=True).emit(None, {"class": "UsageError", "message": e.format_message(), "file": None,
                                            "op": None, "tensor": None, "details": None}, EXIT_USAGE)
        else:
            e.show()
        sys.exit(EXIT_USAGE)
    except typer.Abort:
        typer.echo("error: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except SystemExit as e:
        # typer ends a write to a closed stdout outside our commands (`tf2tosa --help | head -3`) with exit 1,
        # having wrapped stdout to silence the final flush: that is the reader-closed case, which exits 0
        if type(sys.stdout).__name__ == "PacifyFlushWrapper":
            try:
                _reader_gone()
            except typer.Exit:
                sys.exit(EXIT_OK)
        raise e
    sys.exit(code if isinstance(code, int) else EXIT_OK)


if __name__ == "__main__":  # pragma: no cover
    main()
