"""What the ``tf2tosa`` commands share: the typer app (:data:`app`), the options several commands take, the output
channel and the error handling of a command (:func:`_user_errors`), and the parsing of shapes, dims and ``--input``
files.  :mod:`tf2tosa.cli` registers ``convert`` on the app and :mod:`tf2tosa.cli_commands` the other commands.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

import typer

from .cli_coercion import PlainCoercionGroup
from .cli_output import (
    EXIT_CODES_HELP,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USER,
    Out,
    error_dict,
    one_line,
    routed_logging,
)
from .errors import ConversionError, InputError

app = typer.Typer(
    cls=PlainCoercionGroup, add_completion=True, no_args_is_help=True, rich_markup_mode=None,
    help="Convert TensorFlow Lite (.tflite), TensorFlow (SavedModel, Keras .keras/.h5, GraphDef) and NNEF (folder or "
         ".tgz) models to TOSA 1.0 and prove the conversion by running it.",
    epilog="\b\n" + EXIT_CODES_HELP + "\nEvery command takes --json (one JSON object; schemas in docs/schemas/),\n"
           "-q/--quiet and -v/--verbose.  Guide: docs/guide.md")

F = TypeVar("F", bound=Callable[..., Any])

# options every command takes
JSON = typer.Option(False, "--json", help="print one JSON object (docs/schemas/COMMAND.json) instead of text, "
                    "also on failure")
IO = typer.Option("float", "--io", metavar="float|int",
                  help="int: a quantized model's edge QUANTIZE/DEQUANTIZE move to the host, so the program takes and "
                       "returns int8/int16 (scales and zero points in inspect and the .json sidecar)")
QUIET = typer.Option(False, "-q", "--quiet", help="print only the result line, warnings and errors")
VERBOSE = typer.Option(False, "-v", "--verbose", help="also show TensorFlow/LiteRT logs, dependency warnings and "
                       "progress lines when stderr is not a terminal")

class MlirSyntax(str, Enum):
    """--mlir-syntax (tf2tosa.serializer.mlir.SYNTAXES; spelled out here so --help imports no serializer)"""

    generic = "generic"
    upstream = "upstream"


class TargetName(str, Enum):
    """--target (tf2tosa.tosa.targets.TARGETS)"""

    ethos_u85 = "ethos-u85"
    ethos_u55 = "ethos-u55"
    pro_int_8k = "pro-int-8k"
    pro_fp_8k = "pro-fp-8k"
    vulkan_ml = "vulkan-ml"


TARGET_HELP = ("check the program for a target: ethos-u85 / ethos-u55 (what Vela 5.2 takes from a .tosa file), "
               "pro-int-8k / pro-fp-8k (the TOSA 1.0 profile alone at level 8K), vulkan-ml (what Arm's ML SDK "
               "model converter takes for the Vulkan ML extensions); lists every op it cannot take and the option "
               "that fixes it. A model converted for a target without EXT-CONTROLFLOW (ethos-u55, pro-*-8k, "
               "vulkan-ml) has its side-effect-free COND_IFs if-converted to SELECT")


STATE_IO = typer.Option(False, "--state-io", help="turn each EXT-VARIABLE variable into a graph input NAME_state_in "
                        "(the previous state) and output NAME_state_out (the next), for runtimes and NPU compilers "
                        "without EXT-VARIABLE")
KEEP_VARIABLES = typer.Option(
    None, "--keep-variables", metavar="NAME[,NAME]|all",
    help="TensorFlow: keep these resource variables (or all) as TOSA variables (EXT-VARIABLE) that hold their "
         "state across invocations; the others are frozen to constants (repeatable)")


TRUST_MODEL = typer.Option(False, "--trust-model",
                           help="TensorFlow: load and run the source model even when its graph holds ops that "
                                "touch the file system or the network, call Python or wait on queues (refused "
                                "otherwise)")
UNSAFE_DESERIALIZATION = typer.Option(
    False, "--unsafe-deserialization",
    help="Keras .keras/.h5: load with safe mode off, which RUNS the Python code stored in the file (Lambda layers); "
         "only for files you trust")


CUSTOM_OBJECTS = typer.Option(
    None, "--custom-objects", metavar="MODULE.py",
    help="Keras .keras/.h5: a Python module file defining the custom layers (or other objects) the file names; "
         "RUNS that module (a CUSTOM_OBJECTS dict in it, else its public classes and functions); repeatable")


MAX_EXTRACT = typer.Option(
    None, "--max-extract-mb", metavar="N", min=1,
    help="NNEF .tgz/.tar and Keras .keras archives: unpack at most N MiB per member and in total (default 2048)")


TAG = typer.Option(None, "--tag", metavar="TAG[,TAG]",
                   help="SavedModel: the MetaGraph tag set to load (serve, eval, train …; `inspect` lists them); "
                        "default: the one holding --signature, serve first")
CUT_INPUTS = typer.Option(
    None, "--inputs", metavar="NAME[:SHAPE[:DTYPE]]",
    help="TensorFlow: cut the graph here: these tensors (node or node:k; shape 1x13 or [1,13], ? unknown) become "
         "the inputs and only the ops between them and --outputs are converted (comma-separated, repeatable)")
CUT_OUTPUTS = typer.Option(
    None, "--outputs", metavar="NAME",
    help="TensorFlow: convert up to these tensors (node or node:k) instead of the signature's outputs "
         "(comma-separated, repeatable)")


def _cut(tag: str | None, inputs: list[str] | None, outputs: list[str] | None) -> dict[str, Any]:
    """``--tag``, ``--inputs`` and ``--outputs`` → the ``tag``, ``inputs`` and ``outputs`` keywords, only when
    given."""
    return {**({"tag": tag} if tag else {}), **({"inputs": list(inputs)} if inputs else {}),
            **({"outputs": list(outputs)} if outputs else {})}


def _unsafe(flag: bool, trust: bool = False) -> dict[str, Any]:
    """``--unsafe-deserialization`` and ``--trust-model`` → the ``unsafe_deserialization`` and ``trust_model``
    keywords, only when given."""
    return {**({"unsafe_deserialization": True} if flag else {}), **({"trust_model": True} if trust else {})}


def _target(target: TargetName | None) -> dict[str, Any]:
    """``--target`` → the ``target`` keyword of ``convert`` (a target without EXT-CONTROLFLOW if-converts), only
    when given."""
    return {"target": target.value} if target is not None else {}


def _custom_objects(paths: list[Path] | None, model: Path) -> dict[str, Any]:
    """``--custom-objects`` (repeatable) → the ``custom_objects`` keyword, only when given (and only for a Keras
    file)."""
    if not paths:
        return {}
    if model.suffix.lower() not in (".keras", ".h5", ".hdf5"):
        raise InputError(f"{model}: --custom-objects is for Keras .keras/.h5 files")
    return {"custom_objects": [str(p) for p in paths]}


def _keep_variables(items: list[str] | None) -> dict[str, Any]:
    """``--keep-variables`` (comma-separated, repeatable, ``all``) → the ``keep_variables`` keyword, if any."""
    keep = [n.strip() for k in items or [] for n in k.split(",") if n.strip()]
    return {"keep_variables": "all" if "all" in keep else keep} if keep else {}


ORACLE_HELP = ("what integer and float outputs are judged against: ref (LiteRT's reference kernels, the default for "
               ".tflite), optimized (LiteRT's default kernels) or tensorflow (the default for TensorFlow models)")
ORACLE = typer.Option(None, "--oracle", metavar="ORACLE", help=ORACLE_HELP)

_out_stack: list[Out] = []


def _out() -> Out:
    """The output channel of the running command."""
    return _out_stack[-1] if _out_stack else Out("tf2tosa")


def _user_errors(fn: F) -> F:
    """Run a command: its returned dict becomes the ``--json`` object; ConversionError (and any OSError) becomes a
    one-line message (or a JSON error object) and exit code 1, with no traceback; Ctrl-C exits 130.  Output
    files are written all-or-none (:mod:`tf2tosa.outputs`), so nothing is left behind."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        out = Out(fn.__name__.rstrip("_"), json=bool(kwargs.get("json_")), quiet=bool(kwargs.get("quiet")),
                  verbose=bool(kwargs.get("verbose")))
        if not out.verbose:
            from .quiet import silence_dependencies

            silence_dependencies()
        _out_stack.append(out)
        try:
            try:
                with routed_logging(out):
                    payload = fn(*args, **kwargs)
            except ConversionError as e:
                _fail(out, e, EXIT_USER)
            except BrokenPipeError:  # the reader of our stdout went away (`tf2tosa ops | head`): stop quietly
                _reader_gone()
            except OSError as e:
                _fail(out, e, EXIT_USER)
            except KeyboardInterrupt:
                _fail(out, KeyboardInterrupt("interrupted"), EXIT_INTERRUPTED, cls="Interrupted")
            except Exception as e:
                if not out.json:
                    raise
                import traceback

                traceback.print_exc()
                _fail(out, e, EXIT_USER, cls="InternalError")
            out.emit(payload, None, out.exit_code)
            if out.exit_code != EXIT_OK:
                raise typer.Exit(out.exit_code)
        finally:
            _out_stack.pop()

    return wrapper  # type: ignore[return-value]


def _print_report(out: Out, report: Any) -> None:
    """A verify report: in full, or with -q its one-line verdict; its warnings (a constant oracle output) always,
    on stderr and in the JSON ``warnings``."""
    out.result(report.summary() if out.quiet else report.text(warnings=False))
    for w in report.warnings:
        out.warn(w)


def _reader_gone() -> None:
    """Our stdout's reader closed it (``tf2tosa inspect m.tosa | head -3``): stop with no message and exit 0, as
    ``cat`` and ``ls`` do for the reader-closed case (the reader got what it asked for).  Later writes, including
    the interpreter's final flush, go to the null device instead of raising again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    raise typer.Exit(EXIT_OK) from None


def _fail(out: Out, exc: BaseException, code: int, cls: str | None = None) -> None:
    """Report ``exc`` (text on stderr, or the JSON error object) and exit with ``code``."""
    if out.json:
        out.emit(None, error_dict(exc, cls), code)
    else:
        text = str(exc)
        if isinstance(exc, OSError) and exc.filename is not None:
            text = f"{exc.strerror or exc}: {exc.filename}"
        typer.echo(f"error: {one_line(text)}", err=True)
    raise typer.Exit(code) from None


def _version_callback(value: bool) -> None:
    if value:
        from . import __version__

        typer.echo(f"tf2tosa {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True,
                                       help="print the version and exit")) -> None:
    """Convert TensorFlow Lite, TensorFlow and NNEF models to TOSA 1.0 and prove the conversion by running it."""


def parse_shapes(items: list[str] | None, file: str | None = None) -> dict[str, tuple[int, ...]]:
    """``NAME=1,224,224,3`` → {"NAME": (1, 224, 224, 3)} (errors name ``file``, the model the flags are for)."""
    out: dict[str, tuple[int, ...]] = {}
    for item in items or []:
        name, sep, dims = item.rpartition("=")
        try:
            if not sep or not name:
                raise ValueError
            out[name] = tuple(int(d) for d in dims.replace("x", ",").split(",") if d.strip())
        except ValueError:
            raise InputError(f"bad --input-shape {item!r}; expected NAME=1,224,224,3", file=file) from None
    return out


def parse_dims(items: list[str] | None, flag: str = "--dim", file: str | None = None) -> dict[str, int]:
    """``SYMBOL=VALUE`` (repeatable) → {"SYMBOL": VALUE}; the same symbol given two different values is an error
    (naming ``file``, the model the flags are for)."""
    out: dict[str, int] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        try:
            if not sep or not name.strip():
                raise ValueError
            size = int(value)
        except ValueError:
            raise InputError(f"bad {flag} {item!r}; expected SYMBOL=VALUE, e.g. batch=4", file=file) from None
        name = name.strip()
        if name in out and out[name] != size:
            raise InputError(f"symbol {name!r} bound to two values: {flag} {name}={out[name]} and {flag} {item}",
                             file=file, tensor=name)
        out[name] = size
    return out


def _is_tflite(path: Path) -> bool:
    from .converter.tensorflow import is_tensorflow_source

    return not is_tensorflow_source(str(path))


def _quiet_deps() -> Any:
    """Filter TensorFlow's C++ log lines out of stderr around work that may load TensorFlow (not with -v)."""
    from .quiet import filtered_stderr

    return filtered_stderr(not _out().verbose)


def _progress(title: str) -> Any:
    from .progress import Progress

    out = _out()
    return Progress(title, enabled=out.progress, verbose=out.verbose)


def _model_facts(m: Any) -> dict[str, Any]:
    g = m.graph

    def value(v: Any) -> dict[str, Any]:
        return {"name": v.name, "source": getattr(v, "source", None), "shape": list(v.type.shape),
                "dtype": v.dtype.value, "type": str(v.type)}

    return {"profiles": m.profiles, "extensions": m.extensions, "inputs": [value(v) for v in g.inputs],
            "outputs": [value(v) for v in g.outputs], "op_counts": dict(g.op_counts()),
            "io_quantization": m.io_quantization, "fixed_dims": list(g.record.fixed_dims)}


NPU_ROUNDING = typer.Option("exact", "--npu-rounding", metavar="exact|native",
                            help="softmax for an NPU: exact (TFLite's reference kernels) or native (the int8 "
                                 "softmax's exp as one i16 TABLE: cheaper on Ethos-U, within 1 LSB, inexact)")


def _custom_ops(graph: Any) -> list[str]:
    """operator_name of every CUSTOM op (ops kept unlowered with --custom-ops)."""
    return [str(op.attrs.get("operator_name", "?")) for op in graph.topological_order() if op.opcode == "CUSTOM"]
