"""The ``tf2tosa`` command line."""

from __future__ import annotations

import functools
import io
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer

from .errors import ConversionError, InputError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Convert TensorFlow Lite and TensorFlow models to TOSA 1.0 and prove the conversion by running "
                       "it.")

F = TypeVar("F", bound=Callable[..., Any])


def _user_errors(fn: F) -> F:
    """Turn ConversionError (and any OSError) into a one-line message and exit code 1, Ctrl-C into exit code 130
    (no traceback).  Output files are written all-or-none (:mod:`tf2tosa.outputs`), so nothing is left behind."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ConversionError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(1) from None
        except OSError as e:  # a file operation outside tf2tosa.outputs: still one line naming the path
            where = f"{e.filename}: " if e.filename else ""
            typer.echo(f"error: {where}{e.strerror or e}", err=True)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            typer.echo("interrupted", err=True)
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


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


@app.command()
@_user_errors
def convert(model: Path = typer.Argument(..., help="the model: .tflite, SavedModel dir, .keras, .h5 or frozen .pb"),
            output: Path = typer.Option(..., "-o", "--output", help="the .tosa file to write"),
            mlir: Path | None = typer.Option(None, "--mlir", help="also write TOSA-dialect MLIR text here"),
            input_shape: list[str] | None = typer.Option(None, "--input-shape", help="NAME=1,224,224,3 (repeatable)"),
            verify: bool = typer.Option(False, "--verify", help="compare with LiteRT / TensorFlow on random inputs"),
            signature: str = typer.Option("serving_default", "--signature", help="SavedModel signature to convert"),
            qat: str = typer.Option("auto", "--qat", help="FakeQuant (QAT) models: auto (integer when FakeQuants "
                                    "cover the graph), int8, or float (float emulation)"),
            qat_io: str = typer.Option("float", "--qat-io", help="integer QAT graphs: float inputs/outputs "
                                       "(QUANTIZE/DEQUANTIZE) or int8"),
            custom_ops: bool = typer.Option(False, "--custom-ops", help="emit ops that cannot be lowered as TOSA "
                                            "CUSTOM operators instead of failing"),
            max_unroll: int = typer.Option(1024, "--max-unroll", help="unroll WHILE loops with a static trip count "
                                           "up to this many iterations (0: emit WHILE_LOOP)"),
            rounding: str = typer.Option("double", "--rounding",
                                         help="requantization rounding: double (TFLite-exact, EXT-DOUBLEROUND) "
                                              "or single (PRO-INT only)"),
            ) -> None:
    """Convert MODEL to a TOSA 1.0 flatbuffer."""
    from .api import convert as do_convert

    t0 = time.perf_counter()
    m = do_convert(str(model), input_shapes=parse_shapes(input_shape), rounding=rounding, signature=signature,
                   qat=qat, qat_io=qat_io, custom_ops=custom_ops, max_unroll=max_unroll)
    m.save(output, mlir=mlir)
    ops = sum(1 for op in m.graph.ops.values() if op.opcode not in ("CONST", "CONST_SHAPE"))
    typer.echo(f"wrote {output} ({ops} ops; profiles {', '.join(m.profiles) or '-'}; "
               f"extensions {', '.join(m.extensions) or '-'}) in {time.perf_counter() - t0:.2f}s")
    for w in m.graph.meta.get("warnings", []):
        typer.echo(f"warning: {w}", err=True)
    custom = _custom_ops(m.graph)
    if custom:
        typer.echo(f"warning: {len(custom)} op(s) kept as TOSA CUSTOM operators (not runnable): "
                   f"{', '.join(sorted(set(custom)))}", err=True)
        if verify:
            typer.echo("verify skipped: the graph contains CUSTOM operators", err=True)
            return
    if verify:
        report = m.verify()
        typer.echo(str(report))
        if not report.ok:
            raise typer.Exit(2)


@app.command()
@_user_errors
def run(model: Path = typer.Argument(..., help="a .tosa file"),
        input: list[str] | None = typer.Option(None, "--input", help="NAME=x.npy (repeatable)"),
        output_dir: Path | None = typer.Option(None, "--output-dir", help="write each output as NAME.npy"),
        seed: int = typer.Option(0, help="seed for inputs not given with --input"),
        profile_ops: bool = typer.Option(False, "--profile-ops", help="print the time spent in each op"),
        ) -> None:
    """Run a .tosa file in the embedded executor."""
    import numpy as np

    from .api import load
    from .verify.compare import random_inputs

    m = load(str(model))
    given = _load_inputs(input)
    names = {v.name for v in m.graph.inputs}
    for k in given:
        if k not in names:
            raise InputError(f"no model input named {k!r} (inputs: {', '.join(sorted(names))})", tensor=k)
    feed = {**random_inputs(m.graph, seed), **given}
    if profile_ops:
        from .executor import run_with_profile

        outs, prof = run_with_profile(m.graph, feed)
        _print_profile(prof)
    else:
        outs = m.run(feed)
    files: dict[str | os.PathLike[str], bytes] = {}
    for name, arr in outs.items():
        typer.echo(f"{name}: shape={list(arr.shape)} dtype={arr.dtype} "
                   f"min={arr.min() if arr.size else 0} max={arr.max() if arr.size else 0}")
        buf = io.BytesIO()
        np.save(buf, arr)
        files[(output_dir or Path()) / f"{name}.npy"] = buf.getvalue()
    if output_dir is not None:
        from .outputs import write_files

        write_files(files, make_dirs=True)  # every output or none


def _custom_ops(graph: Any) -> list[str]:
    """operator_name of every CUSTOM op (ops kept unlowered with --custom-ops)."""
    return [str(op.attrs.get("operator_name", "?")) for op in graph.topological_order() if op.opcode == "CUSTOM"]


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
def inspect(file: Path = typer.Argument(..., help="a .tosa file, or a model to convert first"),
            signature: str = typer.Option("serving_default", "--signature", help="SavedModel signature")) -> None:
    """Show the ops, tensors and the profiles/extensions a TOSA program needs."""
    from .api import convert as do_convert
    from .api import load
    from .converter.tensorflow import is_tensorflow_source

    if file.suffix == ".tflite" or is_tensorflow_source(str(file)):
        m = do_convert(str(file), signature=signature)
    else:
        m = load(str(file))
    g = m.graph
    typer.echo(f"{file}: TOSA 1.0")
    typer.echo(f"profiles:   {', '.join(m.profiles) or '-'}")
    typer.echo(f"extensions: {', '.join(m.extensions) or '-'}")
    typer.echo("inputs:")
    for v in g.inputs:
        typer.echo(f"  {v.name}: {v.type}")
    typer.echo("outputs:")
    for v in g.outputs:
        typer.echo(f"  {v.name}: {v.type}")
    typer.echo("ops:")
    for name, n in g.op_counts().items():
        typer.echo(f"  {name:28s} {n}")
    custom = _custom_ops(g)
    if custom:
        typer.echo(f"partial graph: {len(custom)} CUSTOM operator(s) stand for ops that could not be lowered "
                   f"(the executor and the reference model cannot run them):")
        for name in custom:
            typer.echo(f"  {name}")


@app.command()
@_user_errors
def verify(model: Path = typer.Argument(..., help="the model: .tflite, SavedModel dir, .keras, .h5 or frozen .pb"),
           input_shape: list[str] | None = typer.Option(None, "--input-shape", help="NAME=1,224,224,3"),
           input: list[str] | None = typer.Option(None, "--input", help="NAME=x.npy (repeatable)"),
           num: int = typer.Option(3, help="number of random input sets"),
           seed: int = typer.Option(0, help="seed of the random inputs"),
           reference: bool = typer.Option(False, "--reference-kernels", help="LiteRT BUILTIN_REF kernels"),
           rounding: str = typer.Option("double", "--rounding", help="double or single"),
           signature: str = typer.Option("serving_default", "--signature", help="SavedModel signature"),
           layers: bool = typer.Option(False, "--layers", help="compare every layer with LiteRT and name the first "
                                       "diverging one (.tflite only)"),
           layers_html: Path | None = typer.Option(None, "--layers-html", help="write the per-layer error plot here"),
           layers_png: Path | None = typer.Option(None, "--layers-png", help="also a PNG of it (headless Chromium)"),
           ) -> None:
    """Convert MODEL and compare the executor with its source runtime (LiteRT for .tflite, TensorFlow for
    SavedModel/Keras/GraphDef), reporting each output's error."""
    if layers:
        from .verify.layers import layers_command

        text, code = layers_command(str(model), seed=seed, out_html=str(layers_html) if layers_html else None,
                                    out_png=str(layers_png) if layers_png else None,
                                    input_shapes=parse_shapes(input_shape), rounding=rounding)
        typer.echo(text)
        if code:
            raise typer.Exit(code)
        return
    from .api import convert as do_convert

    m = do_convert(str(model), input_shapes=parse_shapes(input_shape), rounding=rounding, signature=signature)
    given = _load_inputs(input)
    sets = None
    if given:
        from .verify.compare import random_inputs

        sets = [{**random_inputs(m.graph, seed), **given}]
    report = m.verify(sets, seed=seed, num=num, reference_kernels=reference)
    typer.echo(str(report))
    if not report.ok:
        raise typer.Exit(2)


@app.command()
@_user_errors
def zoo(list_: bool = typer.Option(False, "--list", help="list the selected model variants; build nothing"),
        filter: str | None = typer.Option(None, "--filter", help="comma-separated patterns: model, model/variant, "
                                          "/variant, family, shell wildcards; !pattern excludes"),
        jobs: int = typer.Option(1, "--jobs", "-j", help="parallel worker processes"),
        report: Path | None = typer.Option(None, "--report", help="folder for zoo.json/zoo.md/zoo.html "
                                           "(default out/zoo)"),
        ) -> None:
    """Run the model-zoo regression suite: build, convert, validate, run and compare every model variant."""
    from .zoo import zoo_command

    code = zoo_command(list_only=list_, filter=filter, jobs=jobs, report=str(report) if report else None,
                       echo=typer.echo)
    if code:
        raise typer.Exit(code)


@app.command()
@_user_errors
def ops() -> None:
    """Print the op-support table generated from the legalization registry."""
    from .support import support_table

    typer.echo(support_table())


@app.command()
@_user_errors
def demo(out_dir: Path = typer.Option(Path("out/demo"), "--out-dir", help="where to write the .tosa files"),
         samples: Path | None = typer.Option(None, "--samples", help="folder of sample .tflite models")) -> None:
    """Convert and verify the bundled sample models."""
    from .api import convert as do_convert

    folder = samples or Path(__file__).resolve().parent.parent / "models" / "samples"
    models = sorted(folder.glob("*.tflite"))
    if not models:
        raise InputError(f"no sample models in {folder}")
    out_dir.mkdir(parents=True, exist_ok=True)
    failed = 0
    for path in models:
        t0 = time.perf_counter()
        m = do_convert(str(path))
        dest = out_dir / (path.stem + ".tosa")
        m.save(dest, mlir=dest.with_suffix(".mlir"))
        integer = "PRO-INT" in m.profiles  # integer graphs are checked bit for bit against the reference kernels
        report = m.verify(num=3, reference_kernels=integer)
        status = "PASS" if report.ok else "FAIL"
        failed += not report.ok
        worst = max((o.rel for o in report.outputs), default=0.0)
        mism = sum(o.mismatches for o in report.outputs)
        typer.echo(f"{status}  {path.name:32s} -> {dest}  ops={len(m.graph.ops):4d}  rel_err={worst:.2e}  "
                   f"mismatches={mism}  {time.perf_counter() - t0:.2f}s")
    if failed:
        typer.echo(f"{failed} of {len(models)} sample models failed verification", err=True)
        raise typer.Exit(2)
    typer.echo(f"all {len(models)} sample models converted and verified")


def main() -> None:  # pragma: no cover
    app(prog_name="tf2tosa")


if __name__ == "__main__":  # pragma: no cover
    main()
