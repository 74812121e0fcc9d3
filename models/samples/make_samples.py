"""Write the small committed sample models in this directory (each well under 100 KB).

    PYTHONPATH=. .venv/bin/python models/samples/make_samples.py

Models are deterministic (seeded weights) and come from the builders in ``tests/modelgen.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO / "tests"))

import modelgen  # noqa: E402

MAX_BYTES = 100_000

SAMPLES: dict[str, Callable[[], bytes]] = {
    "small_cnn_f32.tflite": lambda: modelgen.small_cnn(size=32, width=16),
    "mlp_f32.tflite": lambda: modelgen.mlp(),
    "depthwise_f32.tflite": lambda: modelgen.depthwise_net(),
    "small_cnn_int8.tflite": lambda: modelgen.small_cnn(size=32, width=16, quant="int8"),
    "mlp_uint8io.tflite": lambda: modelgen.mlp(quant="uint8io"),
}


def main() -> int:
    failed = 0
    for name, build in SAMPLES.items():
        try:
            data = build()
        except Exception as e:  # best effort per file (the int8 one in particular)
            print(f"FAILED {name}: {type(e).__name__}: {e}")
            failed += 1
            continue
        if len(data) > MAX_BYTES:
            print(f"FAILED {name}: {len(data)} bytes > {MAX_BYTES}")
            failed += 1
            continue
        (HERE / name).write_bytes(data)
        print(f"wrote {name}: {len(data)} bytes")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
