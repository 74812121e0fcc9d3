"""FlexBuffer decoding (the schema-less format of TFLite custom-op options).

Shared by the TFLite frontend, which decodes each custom op's options once, and the custom-op rules, which decode
options a graph carries undecoded; it sits below both (docs/architecture.md, "Layers")."""

from __future__ import annotations

import struct
from typing import Any


def decode_flexbuffer(data: bytes, budget: int = 200_000, max_depth: int = 64) -> Any:
    """Decode a FlexBuffer (custom options) into plain Python values.

    Maps → dict (str keys), vectors → list, blobs → bytes, strings → str.  Raises
    ValueError on malformed data, including data whose decoding would visit more
    than ``budget`` elements or nest deeper than ``max_depth`` (a corrupt buffer can
    point back into itself).
    """
    from flatbuffers import flexbuffers  # here, not at the top: ~1.7 ms a model without custom options skips

    buf = bytearray(data)
    if len(buf) < 3:
        raise ValueError("flexbuffer too small")
    seen = [0]

    def spend(n: int) -> None:
        seen[0] += n
        if n < 0 or seen[0] > budget:
            raise ValueError("flexbuffer too large or self-referencing")

    def walk(ref: Any, depth: int) -> Any:
        if depth > max_depth:
            raise ValueError("flexbuffer nested too deeply")
        spend(1)
        if ref.IsMap:
            m = ref.AsMap
            keys, vals = m.Keys, m.Values
            spend(len(keys))
            if len(keys) != len(vals):
                raise ValueError("flexbuffer map keys and values differ in length")
            return {str(k.AsKey): walk(v, depth + 1) for k, v in zip(keys, vals)}
        if ref.IsVector:
            vec = ref.AsVector
            spend(len(vec))
            return [walk(e, depth + 1) for e in vec]
        if ref.IsTypedVector or ref.IsFixedTypedVector:
            tv = ref.AsTypedVector if ref.IsTypedVector else ref.AsFixedTypedVector
            spend(len(tv))
            return _plain(tv.Value)
        if ref.IsBlob:
            blob = ref.AsBlob
            spend(len(blob) // 64)
            return bytes(blob)
        return _plain(ref.Value)

    try:
        return walk(flexbuffers.GetRoot(buf), 0)
    except (AssertionError, IndexError, KeyError, OverflowError, TypeError, UnicodeDecodeError, struct.error) as e:
        # the flexbuffers module reads past the end or meets an impossible width on corrupt data
        raise ValueError(f"malformed flexbuffer: {type(e).__name__}") from e


def _plain(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    return v
