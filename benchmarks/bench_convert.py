"""Conversion wall time: .tflite → .tosa, ours against Arm's pipeline, start-up and conversion apart.

Side by side in one run, per model:
  * ours:  ``tf2tosa convert model.tflite -o out.tosa`` (the CLI's ``main``, in a fresh interpreter)
  * Arm:   ``tosa-converter-for-tflite model.tflite -o out.mlirbc`` then ``tosa-opt --tosa-serialize``
Our process times its own conversion (the call of the CLI's ``main``, from the parsed arguments to the written
file, lazily imported modules included); start-up is the rest of the process's wall time (interpreter, imports of
the CLI, exit).  Each is reported as a ratio to Arm's whole-pipeline time (both of Arm's processes, start-up
included), so ``conv/Arm`` <= 1 means the conversion itself is not slower than Arm's whole pipeline and
``start/Arm`` is what the interpreter and imports add.  The peak resident set of our process (``os.wait4``'s
rusage, the least of the runs) is reported over the model's file size.  A third command runs in the same rounds: the
floor,
``python -c 'import numpy, networkx'`` in our CLI's interpreter and environment — the two libraries the IR needs,
so no conversion by this package can start faster.  The rounds are interleaved and the minimum of each tool's runs
is reported (the machine's load then costs both alike).

Models: MobileNetV2 float32 and int8 (``tests.modelgen``), the op-heavy int8 models of ``bench_apps.py``
(NASNetMobile, EfficientNet-B0, MobileNetV3-Large, DenseNet121) and the 27 MB float16-weight model of
``bench_scale.py`` (``conv_fp16_27mb``, whose peak memory is held to twice its file); those are built once in a
child process and cached.

Our CLI runs this checkout's package (``PYTHONPATH``) with byte-compiled modules cached under
``.cache/bench/pycache`` (``PYTHONPYCACHEPREFIX``), as an installed package has them: an environment with
``PYTHONDONTWRITEBYTECODE`` set would otherwise recompile every module of the package on every start.

    python benchmarks/bench_convert.py [--repeat 5] [--model path.tflite ...] [--no-apps] [--only LABEL ...]
                                       [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def ours_env() -> dict[str, str]:
    """The environment our CLI runs in: this checkout first on the path, byte-code cached."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(ROOT / ".cache" / "bench" / "pycache")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    return env


def timed(cmd: list[str], env: dict[str, str] | None = None) -> float:
    return timed_rss(cmd, env)[0]


def timed_rss(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, int]:
    """(wall seconds, peak RSS in bytes) of one child process (its ``os.wait4`` rusage)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    dt = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stderr.close()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{err.decode(errors='replace')[-2000:]}")
    return dt, usage.ru_maxrss * 1024  # Linux reports kilobytes


def tosa_bin(name: str) -> str:
    return str(ROOT / ".venv-tosa" / "bin" / name)


def ours_cli() -> str:
    return str(Path(sys.executable).with_name("tf2tosa"))


def arm_commands(model: Path, out: Path) -> list[list[str]]:
    """Arm's pipeline: the converter to MLIR bytecode, then tosa-opt serializing it to a .tosa."""
    return [[tosa_bin("tosa-converter-for-tflite"), str(model), "--bytecode", "-o", str(out / "peer.mlirbc")],
            [tosa_bin("tosa-opt"), str(out / "peer.mlirbc"),
             f"--tosa-serialize=tosa-flatbuffer-filename={out / 'peer.tosa'}", "-o", "/dev/null"]]


def default_models() -> dict[str, Path]:
    """MobileNetV2 float32 and int8 from tests.modelgen (cached .tflite files; TensorFlow builds them once)."""
    from tests.modelgen import mobilenet_v2

    models = {}
    for label, quant in (("MobileNetV2 float32", None), ("MobileNetV2 int8", "int8")):
        path = ROOT / ".cache" / "bench" / f"mobilenet_v2_{quant or 'f32'}.tflite"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(mobilenet_v2(quant=quant))
        models[label] = path
    return models


#: the op-heavy int8 models of bench_apps.py: label -> architecture
APPS = {"NASNetMobile int8": "nasnetmobile", "EfficientNet-B0 int8": "efficientnetb0",
        "MobileNetV3-Large int8": "mobilenetv3large", "DenseNet121 int8": "densenet121"}


def apps_models() -> dict[str, Path]:
    """The int8 .tflite of :data:`APPS` (bench_apps.py builds the missing ones, in a child process)."""
    from benchmarks.bench_apps import model_path

    paths = {label: model_path(arch, "int8") for label, arch in APPS.items()}
    missing = [a for label, a in APPS.items() if not paths[label].exists()]
    if missing:
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_apps.py"), "--build-only",
                        *sum((["--arch", a] for a in missing), []), "--variant", "int8"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return {label: p for label, p in paths.items() if p.exists()}


#: the float16-weight model of bench_scale.py: label -> its name there
SCALE = {"conv fp16 27 MB": "conv_fp16_27mb"}


def scale_models() -> dict[str, Path]:
    """The .tflite of :data:`SCALE` (bench_scale.py builds the missing ones, in a child process)."""
    cache = ROOT / ".cache" / "bench"

    def found(name: str) -> Path | None:
        return next(iter(sorted(cache.glob(f"scale-{name}-*.tflite"))), None)

    missing = [n for n in SCALE.values() if found(n) is None]
    if missing:
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_scale.py"), "--build-only",
                        *sum((["--only", n] for n in missing), [])], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return {label: p for label, n in SCALE.items() if (p := found(n)) is not None}


FLOOR_CODE = "import numpy, networkx"

#: our CLI in a fresh interpreter, timing its own conversion: ``python -c OURS_CODE TIMES.json convert ...``; ``main``
#: is called as the console script calls it (arguments in ``sys.argv``: the process's own entry point, which tunes
#: the cyclic garbage collector for a one-shot command)
OURS_CODE = """import sys, time
from tf2tosa.cli import main
times = sys.argv[1]
sys.argv = ["tf2tosa", *sys.argv[2:]]
t0 = time.perf_counter()
try:
    main()
except SystemExit as e:
    if e.code:
        raise
t1 = time.perf_counter()
with open(times, "w") as f:
    f.write(repr(t1 - t0))
"""


def floor_cmd() -> list[str]:
    """The start-up floor: our interpreter importing the two libraries the IR is built on, nothing else."""
    return [sys.executable, "-c", FLOOR_CODE]


def ours_split(model: Path, out: Path, env: dict[str, str]) -> tuple[float, float, int]:
    """(start-up, conversion) seconds of one run of our CLI, the process's wall time less the conversion it timed,
    and the process's peak RSS in bytes."""
    times = out / "ours_times.txt"
    wall, rss = timed_rss([sys.executable, "-c", OURS_CODE, str(times), "convert", str(model), "-o",
                           str(out / "ours.tosa")], env)
    conv = float(times.read_text())
    return wall - conv, conv, rss


def bench(label: str, model: Path, repeat: int) -> dict[str, object]:
    env = ours_env()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        arm = arm_commands(model, out)
        ours_split(model, out, env), [timed(c) for c in arm], timed(floor_cmd(), env)  # warm the caches
        start, conv, rss, peer, floor = [], [], [], [], []
        for _ in range(repeat):
            s, c, m = ours_split(model, out, env)
            start.append(s)
            conv.append(c)
            rss.append(m)
            peer.append(sum(timed(c) for c in arm))
            floor.append(timed(floor_cmd(), env))
        sizes = {"ours_tosa_bytes": (out / "ours.tosa").stat().st_size,
                 "peer_tosa_bytes": (out / "peer.tosa").stat().st_size}
    s, c, p, f = min(start), min(conv), min(peer), min(floor)
    size = model.stat().st_size
    return {"label": label, "model": str(model), "model_bytes": size, "repeat": repeat,
            "ours_start_s": start, "ours_conv_s": conv, "ours_rss": rss, "peer_s": peer, "floor_s": floor,
            "ours_rss_min": min(rss), "ratio_rss_over_model": min(rss) / size,
            "ours_start_min_s": s, "ours_conv_min_s": c, "peer_min_s": p, "floor_min_s": f,
            "ratio_start_over_peer": s / p, "ratio_conv_over_peer": c / p, "ratio_floor_over_peer": f / p, **sizes}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--model", type=Path, action="append", default=None,
                    help="a .tflite (repeatable; default: MobileNetV2 float32 and int8 from tests.modelgen and the "
                         "op-heavy int8 models of bench_apps.py)")
    ap.add_argument("--no-apps", action="store_true", help="leave out the bench_apps.py and bench_scale.py models")
    ap.add_argument("--only", action="append", default=None, help="run only the default models of this label "
                    "(repeatable), e.g. --only 'NASNetMobile int8'")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    if args.model:
        models = {m.name: m for m in args.model}
    else:
        models = default_models()
        if not args.no_apps:
            models.update(apps_models())
            models.update(scale_models())
        if args.only:
            unknown = [o for o in args.only if o not in models]
            if unknown:
                ap.error(f"unknown model label(s) {unknown}; the labels are {list(models)}")
            models = {k: v for k, v in models.items() if k in args.only}
    results = []
    print(f".tflite -> .tosa, minimum of {args.repeat} interleaved runs of each")
    print(f"  {'model':<24} {'start':>8} {'conv':>8} {'Arm':>8} | {'start/Arm':>9} {'conv/Arm':>8} "
          f"{'(s+c)/Arm':>9} | {'floor':>7} {'floor/Arm':>9} | {'RSS MB':>6} {'RSS/file':>8}")
    for label, path in models.items():
        r = bench(label, path, args.repeat)
        results.append(r)
        s, c, p, f = r["ours_start_min_s"], r["ours_conv_min_s"], r["peer_min_s"], r["floor_min_s"]
        print(f"  {label:<24} {s:>7.3f}s {c:>7.3f}s {p:>7.3f}s | {s / p:>9.2f} {c / p:>8.2f} {(s + c) / p:>9.2f} | "
              f"{f:>6.3f}s {f / p:>9.2f} | {r['ours_rss_min'] / 1e6:>6.1f} {r['ratio_rss_over_model']:>8.2f}")
    print("  start = our process's wall time less its conversion (interpreter, imports of the CLI, exit); conv = the "
          "conversion our process timed (tf2tosa.cli.main convert, file written)")
    print("  Arm = tosa-converter-for-tflite + tosa-opt --tosa-serialize, both processes whole; a ratio <= 1 means "
          "that part of ours takes no longer than Arm's whole pipeline")
    print(f"  floor = python -c '{FLOOR_CODE}' (same interpreter and environment as ours, same rounds)")
    print("  RSS = the least peak resident set of our process over the runs; RSS/file = that over the model's size")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
