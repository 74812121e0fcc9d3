"""The ``tf2tosa`` command line.

Every command takes ``--json`` (one JSON object on stdout, see docs/schemas/), ``-q/--quiet`` and
``-v/--verbose``.  Exit codes: 0 ok, 1 user error, 2 usage error, 3 verification failed, 130 interrupted.
"""

from __future__ import annotations

import functools
import io
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import typer

from .cli_output import (
    EXIT_CODES_HELP,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    EXIT_USER,
    EXIT_VERIFY,
    Out,
    error_dict,
    routed_logging,
)
from .errors import ConversionError, InputError

app = typer.Typer(
    add_completion=True, no_args_is_help=True, rich_markup_mode=None,
    help="Convert TensorFlow Lite and TensorFlow models to TOSA 1.0 and prove the conversion by running it.",
    epilog="\b\n" + EXIT_CODES_HELP + "\nEvery command takes --json (one JSON object; schemas in docs/schemas/),\n"
           "-q/--quiet and -v/--verbose.  Guide: docs/guide.md")

F = TypeVar("F", bound=Callable[..., Any])

# options every command takes
JSON = typer.Option(False, "--json", help="print one JSON object (docs/schemas/COMMAND.json) instead of text, "
                    "also on failure")
QUIET = typer.Option(False, "-q", "--quiet", help="print only the result line, warnings and errors")
VERBOSE = typer.Option(False, "-v", "--verbose", help="also show TensorFlow/LiteRT logs, dependency warnings and "
                       "progress lines when stderr is not a terminal")

ORACLE_HELP = ("what integer and float outputs are judged against: ref (LiteRT's reference kernels, the default for "
               ".tflite), optimized (LiteRT's default kernels) or tensorflow (the default for TensorFlow models)")

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
                import os

                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
                raise typer.Exit(EXIT_USER) from None
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


def _fail(out: Out, exc: BaseException, code: int, cls: str | None = None) -> None:
    """Report ``exc`` (text on stderr, or the JSON error object) and exit with ``code``."""
    if out.json:
        out.emit(None, error_dict(exc, cls), code)
    else:
        text = str(exc)
        if isinstance(exc, OSError) and exc.filename is not None:
            text = f"{exc.strerror or exc}: {exc.filename}"
        typer.echo(f"error: {text}", err=True)
    raise typer.Exit(code) from None


def _version_callback(value: bool) -> None:
    if value:
        from . import __version__

        typer.echo(f"tf2tosa {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True,
                                       help="print the version and exit")) -> None:
    """Convert TensorFlow Lite and TensorFlow models to TOSA 1.0 and prove the conversion by running it."""


def parse_shapes(items: list[str] | None) -> dict[str, tuple[int, ...]]:
    """``NAME=1,224,224,3`` → {"NAME": (1, 224, 224, 3)}."""
    out: dict[str, tuple[int, ...]] = {}
    for item in items or []:
        name, sep, dims = item.rpartition("=")
        try:
            if not sep or not name:
                raise ValueError
            out[name] = tuple(int(d) for d in dims.replace("x", ",").split(",") if d.strip())
        except ValueError:
            raise InputError(f"bad --input-shape {item!r}; expected NAME=1,224,224,3") from None
    return out


def _load_inputs(items: list[str] | None) -> dict[str, Any]:
    import numpy as np

    out: dict[str, Any] = {}
    for item in items or []:
        name, sep, path = item.partition("=")
        if not sep:
            raise InputError(f"bad --input {item!r}; expected NAME=file.npy")
        try:
            out[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise InputError(f"cannot read input file {path!r}: {e}", tensor=name) from None
    return out


def _check_inputs(m: Any, given: dict[str, Any]) -> dict[str, Any]:
    """``given`` (from --input), after checking each name is an input of the model and each dtype its dtype."""
    import numpy as np

    by_name = {v.name: v for v in m.graph.inputs}
    for k, arr in list(given.items()):
        v = by_name.get(k)
        if v is None:
            raise InputError(f"no model input named {k!r} (inputs: {', '.join(sorted(by_name))})", tensor=k)
        want = np.dtype(v.dtype.np_dtype())
        if arr.dtype != want:
            if arr.dtype.kind in "iu" and want.kind in "iu" and arr.dtype.itemsize == want.itemsize:
                given[k] = arr.view(want)  # uint8 data for an i8 input carrying uint8 bits, and the like
            else:
                raise InputError(f"input {k!r}: dtype {arr.dtype} given, the model wants {want}", tensor=k)
    return given


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
            "outputs": [value(v) for v in g.outputs], "op_counts": dict(g.op_counts())}


@app.command()
@_user_errors
def convert(model: Path = typer.Argument(..., metavar="MODEL",
                                         help="the model: .tflite, SavedModel dir, .keras, .h5 or frozen .pb"),
            output: Path = typer.Option(..., "-o", "--output", metavar="PATH", help="the .tosa file to write"),
            mlir: Path | None = typer.Option(None, "--mlir", metavar="PATH",
                                             help="also write TOSA-dialect MLIR text here"),
            input_shape: list[str] | None = typer.Option(None, "--input-shape", metavar="NAME=DIMS",
                                                         help="NAME=1,224,224,3 (repeatable)"),
            verify: bool = typer.Option(False, "--verify/--no-verify", help="then compare with LiteRT / TensorFlow "
                                        "on random inputs (needs the [tf] extra)"),
            oracle: str | None = typer.Option(None, "--oracle", metavar="ORACLE", help=ORACLE_HELP),
            signature: str = typer.Option("serving_default", "--signature", help="SavedModel signature to convert"),
            qat: str = typer.Option("auto", "--qat", metavar="auto|int8|float",
                                    help="FakeQuant (QAT) models: auto (integer when FakeQuants "
                                    "cover the graph), int8, or float (float emulation)"),
            qat_io: str = typer.Option("float", "--qat-io", metavar="float|int8",
                                       help="integer QAT graphs: float inputs/outputs "
                                       "(QUANTIZE/DEQUANTIZE) or int8"),
            custom_ops: bool = typer.Option(False, "--custom-ops", help="emit ops that cannot be lowered as TOSA "
                                            "CUSTOM operators instead of failing"),
            max_unroll: int = typer.Option(1024, "--max-unroll", help="unroll WHILE loops with a static trip count "
                                           "up to this many iterations (0: emit WHILE_LOOP)"),
            rounding: str = typer.Option("double", "--rounding", metavar="double|single",
                                         help="requantization rounding: double (TFLite-exact, EXT-DOUBLEROUND) "
                                              "or single (PRO-INT only)"),
            keep_variables: list[str] | None = typer.Option(
                None, "--keep-variables", metavar="NAME[,NAME]|all",
                help="TensorFlow: keep these resource variables (or all) as TOSA variables (EXT-VARIABLE) that "
                     "hold their state across invocations; the others are frozen to constants (repeatable)"),
            json_: bool = JSON, quiet: bool = QUIET, verbose: bool = VERBOSE,
            ) -> dict[str, Any]:
    """Convert MODEL to a TOSA 1.0 flatbuffer (and with --verify, prove it)."""
    from .api import convert as do_convert

    out = _out()
    if verify and _is_tflite(model):
        from .verify.compare import require_litert

        require_litert()  # fail before the work, with the one-line hint
    t0 = time.perf_counter()
    with _progress(f"convert {model.name}") as prog, _quiet_deps():
        prog(0, 3 if verify else 2, "legalizing")
        keep = [n.strip() for k in keep_variables or [] for n in k.split(",") if n.strip()]
        more: dict[str, Any] = {"keep_variables": "all" if "all" in keep else keep} if keep else {}
        m = do_convert(str(model), input_shapes=parse_shapes(input_shape), rounding=rounding, signature=signature,
                       qat=qat, qat_io=qat_io, custom_ops=custom_ops, max_unroll=max_unroll, **more)
        prog(1, 3 if verify else 2, "writing")
        m.save(output, mlir=mlir)
    ops = sum(1 for op in m.graph.ops.values() if op.opcode not in ("CONST", "CONST_SHAPE"))
    seconds = time.perf_counter() - t0
    out.result(f"wrote {output} ({ops} ops; profiles {', '.join(m.profiles) or '-'}; "
               f"extensions {', '.join(m.extensions) or '-'}) in {seconds:.2f}s")
    for w in m.graph.meta.get("warnings", []):
        out.warn_once(str(w))
    custom = _custom_ops(m.graph)
    payload: dict[str, Any] = {"input": str(model), "output": str(output), "mlir": str(mlir) if mlir else None,
                               "ops": ops, **_model_facts(m), "custom_ops": custom, "seconds": round(seconds, 3),
                               "verify": None, "verify_skipped": None}
    if custom:
        out.warn(f"{len(custom)} op(s) kept as TOSA CUSTOM operators (not runnable): {', '.join(sorted(set(custom)))}")
        if verify:
            payload["verify_skipped"] = "the graph contains CUSTOM operators"
            out.info("verify skipped: the graph contains CUSTOM operators")
            return payload
    if verify:
        with _progress(f"verify {model.name}") as prog, _quiet_deps():
            report = m.verify(oracle=oracle, progress=prog)
        out.result(str(report))
        payload["verify"] = report.to_dict()
        if not report.ok:
            out.exit_code = EXIT_VERIFY
    return payload


@app.command()
@_user_errors
def run(model: Path = typer.Argument(..., metavar="MODEL", help="a .tosa file"),
        input: list[str] | None = typer.Option(None, "--input", metavar="NAME=FILE.npy",
                                               help="NAME=x.npy (repeatable)"),
        output_dir: Path | None = typer.Option(None, "--output-dir", metavar="DIR",
                                               help="write each output as NAME.npy"),
        seed: int = typer.Option(0, help="seed for inputs not given with --input"),
        profile_ops: bool = typer.Option(False, "--profile-ops", help="print the time spent in each op"),
        json_: bool = JSON, quiet: bool = QUIET, verbose: bool = VERBOSE,
        ) -> dict[str, Any]:
    """Run a .tosa file in the embedded executor."""
    import numpy as np

    from .api import load
    from .verify.compare import random_inputs

    out = _out()
    m = load(str(model))
    given = _check_inputs(m, _load_inputs(input))
    feed = {**random_inputs(m.graph, seed), **given}
    profile: dict[str, Any] | None = None
    with _progress(f"run {model.name}") as prog:
        prog(0, 1, "executing")
        if profile_ops:
            from .executor import run_with_profile

            outs, prof = run_with_profile(m.graph, feed)
            profile = _profile_summary(prof)
            if not (out.json or out.quiet):
                _print_profile(prof)
        else:
            outs = m.run(feed)
    results = []
    files: dict[str | os.PathLike[str], bytes] = {}
    for name, arr in outs.items():
        lo = arr.min().item() if arr.size else 0
        hi = arr.max().item() if arr.size else 0
        out.result(f"{name}: shape={list(arr.shape)} dtype={arr.dtype} min={lo} max={hi}")
        file = None
        if output_dir is not None:
            file = output_dir / f"{name}.npy"
            buf = io.BytesIO()
            np.save(buf, arr)
            files[file] = buf.getvalue()
        results.append({"name": name, "shape": list(arr.shape), "dtype": str(arr.dtype), "min": lo, "max": hi,
                        "file": str(file) if file else None})
    if output_dir is not None:
        from .outputs import write_files

        write_files(files, make_dirs=True)  # every output or none
    return {"model": str(model), "seed": seed, "outputs": results, "profile": profile}


def _custom_ops(graph: Any) -> list[str]:
    """operator_name of every CUSTOM op (ops kept unlowered with --custom-ops)."""
    return [str(op.attrs.get("operator_name", "?")) for op in graph.topological_order() if op.opcode == "CUSTOM"]


def _profile_summary(prof: dict[str, float]) -> dict[str, Any]:
    by_kind: dict[str, dict[str, Any]] = {}
    for key, t in prof.items():
        kind = key.split("#")[0]
        entry = by_kind.setdefault(kind, {"count": 0, "ms": 0.0})
        entry["count"] += 1
        entry["ms"] += t * 1e3
    return {"total_ms": sum(prof.values()) * 1e3, "by_kind": by_kind}


def _print_profile(prof: dict[str, float], top: int = 15) -> None:
    total = sum(prof.values()) or 1e-12
    by_kind: dict[str, tuple[int, float]] = {}
    for key, t in prof.items():
        kind = key.split("#")[0]
        n, acc = by_kind.get(kind, (0, 0.0))
        by_kind[kind] = (n + 1, acc + t)
    typer.echo(f"time per op kind (total {total * 1e3:.1f} ms):")
    for kind, (n, t) in sorted(by_kind.items(), key=lambda kv: -kv[1][1]):
        typer.echo(f"  {kind:28s} x{n:<4d} {t * 1e3:9.2f} ms {100 * t / total:5.1f}%")
    typer.echo(f"slowest {min(top, len(prof))} ops:")
    for key, t in sorted(prof.items(), key=lambda kv: -kv[1])[:top]:
        typer.echo(f"  {key:40s} {t * 1e3:9.2f} ms")


@app.command()
@_user_errors
def inspect(file: Path = typer.Argument(..., metavar="FILE", help="a .tosa file, or a model to convert first"),
            signature: str = typer.Option("serving_default", "--signature", help="SavedModel signature"),
            json_: bool = JSON, quiet: bool = QUIET, verbose: bool = VERBOSE) -> dict[str, Any]:
    """Show the ops, tensors and the profiles/extensions a TOSA program needs."""
    from .api import convert as do_convert
    from .api import load
    from .converter.tensorflow import is_tensorflow_source

    out = _out()
    if file.suffix == ".tflite" or is_tensorflow_source(str(file)):
        with _progress(f"convert {file.name}"), _quiet_deps():
            m = do_convert(str(file), signature=signature)
    else:
        m = load(str(file))
    g = m.graph
    out.echo(f"{file}: TOSA 1.0")
    out.echo(f"profiles:   {', '.join(m.profiles) or '-'}")
    out.echo(f"extensions: {', '.join(m.extensions) or '-'}")
    out.echo("inputs:")
    for v in g.inputs:
        out.echo(f"  {v.name}: {v.type}")
    out.echo("outputs:")
    for v in g.outputs:
        out.echo(f"  {v.name}: {v.type}")
    out.echo("ops:")
    for name, n in g.op_counts().items():
        out.echo(f"  {name:28s} {n}")
    for e in g.inexact:
        out.echo(f"inexact lowering: {e['op']} ({e['tensor']}): {e['reason']}")
    custom = _custom_ops(g)
    if custom:
        out.echo(f"partial graph: {len(custom)} CUSTOM operator(s) stand for ops that could not be lowered "
                 f"(the executor and the reference model cannot run them):")
        for name in custom:
            out.echo(f"  {name}")
    return {"file": str(file), "format": "TOSA 1.0", **_model_facts(m), "custom_ops": custom,
            "inexact": g.inexact}


@app.command()
@_user_errors
def verify(model: Path = typer.Argument(..., metavar="MODEL",
                                        help="the model: .tflite, SavedModel dir, .keras, .h5 or frozen .pb"),
           input_shape: list[str] | None = typer.Option(None, "--input-shape", metavar="NAME=DIMS",
                                                        help="NAME=1,224,224,3"),
           input: list[str] | None = typer.Option(None, "--input", metavar="NAME=FILE.npy",
                                                  help="NAME=x.npy (repeatable)"),
           num: int = typer.Option(3, help="number of random input sets"),
           seed: int = typer.Option(0, help="seed of the random inputs"),
           oracle: str | None = typer.Option(None, "--oracle", metavar="ORACLE", help=ORACLE_HELP),
           reference: bool | None = typer.Option(None, "--reference-kernels", hidden=True,
                                                 help="deprecated: --oracle ref (now the default)"),
           rounding: str = typer.Option("double", "--rounding", metavar="double|single", help="double or single"),
           signature: str = typer.Option("serving_default", "--signature", help="SavedModel signature"),
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
           json_: bool = JSON, quiet: bool = QUIET, verbose: bool = VERBOSE,
           ) -> dict[str, Any]:
    """Convert MODEL and compare the executor with its source runtime (LiteRT's reference kernels for .tflite,
    TensorFlow for SavedModel/Keras/GraphDef), reporting each output's error and the bound it was judged by."""
    from .api import convert as do_convert

    out = _out()
    if reference is not None:
        out.info("note: --reference-kernels is deprecated; the reference kernels are the default (--oracle ref)")
        oracle = oracle or ("ref" if reference else "optimized")
    tflite = _is_tflite(model)
    if tflite:
        from .verify.compare import require_litert

        require_litert()
    if (layers or layers_html or layers_png) and not tflite:
        raise InputError(f"{model}: per-layer comparison needs a .tflite file")
    with _progress(f"verify {model.name}") as prog, _quiet_deps():
        prog(0, 0, "converting")
        m = do_convert(str(model), input_shapes=parse_shapes(input_shape), rounding=rounding, signature=signature)
        given = _check_inputs(m, _load_inputs(input))
        sets = None
        if given:
            from .verify.compare import random_inputs

            sets = [{**random_inputs(m.graph, seed), **given}]
        report = m.verify(sets, seed=seed, num=num, oracle=oracle, progress=prog)
        layer_report = None
        if layers or layers_html or layers_png:
            from .verify.layers import verify_layers

            prog(0, 0, "comparing every layer")
            layer_report = verify_layers(str(model), seed=seed, graph=m.graph, reference_kernels=report.oracle == "ref",
                                         out_html=str(layers_html) if layers_html else None,
                                         out_png=str(layers_png) if layers_png else None)
    for w in m.graph.meta.get("warnings", []):
        out.warn_once(str(w))
    out.result(str(report))
    if layer_report is not None:
        out.result(layer_report.summary())
        for p in (layers_html, layers_png):
            if p:
                out.echo(f"  wrote {p}")
    if report_html is not None:
        from .api import atomic_write
        from .verify.verify_html import render_verify_html

        atomic_write(report_html, render_verify_html(report, layer_report).encode("utf-8"))
        out.echo(f"wrote {report_html}")
    if not report.ok or (layer_report is not None and layer_report.first_divergent is not None):
        out.exit_code = EXIT_VERIFY
    return {"model": str(model), "report": report.to_dict(),
            "layers": layer_report.to_dict() if layer_report is not None else None,
            "html": str(report_html) if report_html else None}


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
        json_: bool = JSON, quiet: bool = QUIET, verbose: bool = VERBOSE,
        ) -> dict[str, Any]:
    """Run the model-zoo regression suite: build, convert, validate, run and compare every model variant."""
    from .zoo import zoo_command

    out = _out()
    runs: list[Any] = []
    code = zoo_command(list_only=list_, filter=filter, jobs=jobs, report=str(report) if report else None,
                       echo=out.echo, on_run=runs.append, models=str(models) if models else None)
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
        out.echo(f"{status}  {path.name:32s} -> {dest}  ops={len(m.graph.ops):4d}  rel_err={worst:.2e}  "
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


def main(argv: Sequence[str] | None = None) -> None:
    """The console entry point: runs the app and turns usage errors into exit code 2 (a JSON object with
    ``--json``)."""
    try:  # typer >= 0.20 vendors click
        from typer._click.exceptions import UsageError
    except ImportError:  # pragma: no cover
        from click.exceptions import UsageError  # type: ignore[no-redef,assignment]

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        code = app(args=args, prog_name="tf2tosa", standalone_mode=False)
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
    sys.exit(code if isinstance(code, int) else EXIT_OK)


if __name__ == "__main__":  # pragma: no cover
    main()
