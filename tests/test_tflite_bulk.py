"""The .tflite loader's reads of many tables at once (tensors, buffers, repeated options tables: ``_Loader.bulk``)
give what its one-field-at-a-time reads give: the same graph, or the same error, for the fuzz corpus's models and
for mutants of them whose tensor, quantization, buffer and options fields were changed."""

from __future__ import annotations

import random
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import fuzz  # noqa: E402

from tf2tosa.converter import tflite as fe  # noqa: E402
from tf2tosa.errors import ModelLoadError  # noqa: E402

#: fields the bulk reads cover (fuzz.Field names), mutated more often than the others
BULK_FIELDS = {"ShapeAsNumpy", "ShapeSignatureAsNumpy", "ShapeLength", "ScaleAsNumpy", "ScaleLength",
               "ZeroPointAsNumpy", "ZeroPointLength", "Type", "Buffer", "DataLength", "Padding", "StrideW",
               "StrideH", "FusedActivationFunction", "DepthMultiplier", "Offset", "indirect", "vector", "string"}


def _outcome(data: bytes, bulk: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(fe._Loader, "bulk", bulk)
    monkeypatch.setattr(fe._Loader, "bulk_min", 1)  # (the corpus's models are small)
    try:
        g = fe.load_tflite(data)
    except ModelLoadError as e:
        return str(e)
    out: list[Any] = []
    for sg in g.source.subgraphs:
        out.append([(v.name, repr(v.type)) for v in sg.inputs])
        for op in sg.ops.values():
            vals = op.attrs.get("values")
            out.append((op.name, op.location, sorted((k, repr(a)) for k, a in op.attrs.items() if k != "values"),
                        vals.tobytes() if isinstance(vals, np.ndarray) and vals.dtype != object else repr(vals),
                        [(v.name, v.source, repr(v.type), sorted(v.type.__dict__)) for v in op.results]))
        out.append((sorted(sg.source.stored_shapes.items()), sorted(sg.source.tensor_indices.items())))
    return out


def _mutants(n: int, seed: int) -> Iterator[tuple[str, bytes]]:
    seeds = fuzz.load_corpus(formats=("tflite",))
    rng = random.Random(seed)
    for s in seeds:
        yield s.path.name, s.data
    for _ in range(n):
        s = rng.choice(seeds)
        data = bytearray(s.data)
        bulk = [f for f in s.fields if f.name in BULK_FIELDS]
        for _ in range(rng.choice([1, 1, 2])):
            f = rng.choice(bulk if bulk and rng.random() < 0.7 else s.fields)
            if f.is_float and rng.random() < 0.5:
                data[f.pos:f.pos + f.size] = struct.pack("<f" if f.size == 4 else "<d",
                                                         rng.choice([0.0, -1.0, float("nan"), float("inf")]))
                continue
            v = rng.choice([0, 1, 0xFF, 0x7FFFFFFF, 0xFFFFFFFF, len(data), rng.getrandbits(8 * f.size),
                            int.from_bytes(data[f.pos:f.pos + f.size], "little") + rng.choice([-4, -1, 1, 4])])
            data[f.pos:f.pos + f.size] = (v & ((1 << (8 * f.size)) - 1)).to_bytes(f.size, "little")
        yield s.path.name, bytes(data)


def test_bulk_reads_match_field_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {"loaded": 0, "refused": 0}
    for name, data in _mutants(300, seed=20261129):
        bulk = _outcome(data, True, monkeypatch)
        assert bulk == _outcome(data, False, monkeypatch), name
        seen["refused" if isinstance(bulk, str) else "loaded"] += 1
    assert seen["loaded"] > 50 and seen["refused"] > 50, seen  # (both kinds of outcome compared)
