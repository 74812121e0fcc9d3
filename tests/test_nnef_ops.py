"""Per-operation tests of the NNEF frontend's rules: each standard operation written as NNEF text, converted,
run in our executor and in Arm's reference model, and judged against numpy written here from the NNEF 1.0
specification (seed ``004``: chapter 4's definitions and the compound fragments' bodies), not from the rules.

Float outputs must be within 1e-5 × max|expected| (expected in fp64); integer and logical outputs exact.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

import tf2tosa
from tf2tosa.verify import tosa_tools

pytest.importorskip("nnef")

RTOL = 1e-5
F64 = np.float64


# --------------------------------------------------------------------------- writing NNEF models
def dat(arr: np.ndarray) -> bytes:
    """A float32 NNEF tensor file (spec §5.2: 128-byte header, item-type code 0 = float)."""
    a = np.ascontiguousarray(arr, dtype=np.float32)
    head = bytes([0x4E, 0xEF, 1, 0]) + struct.pack("<II", a.nbytes, a.ndim)
    head += struct.pack("<8I", *(list(a.shape) + [0] * (8 - a.ndim))) + struct.pack("<III", 32, 0, 0)
    return head + bytes(128 - len(head)) + a.tobytes()


def shape_text(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(int(d)) for d in shape) + "]"


def write_graph(folder: Path, body: str, inputs: dict[str, tuple[tuple[int, ...], str]], outputs: Sequence[str],
                variables: dict[str, np.ndarray] | None = None, fragments: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["version 1.0;"]
    if fragments:
        lines.append("extension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;")
        lines.append(fragments)
    lines.append(f"graph G( {', '.join(inputs)} ) -> ( {', '.join(outputs)} )")
    lines.append("{")
    for name, (shape, kind) in inputs.items():
        lines.append(f"    {name} = external<{kind}>(shape = {shape_text(shape)});")
    for label, arr in (variables or {}).items():
        lines.append(f"    {label} = variable<scalar>(shape = {shape_text(arr.shape)}, label = '{label}');")
        (folder / f"{label}.dat").write_bytes(dat(arr))
    lines += ["    " + ln.strip() for ln in body.strip().splitlines()]
    lines.append("}")
    (folder / "graph.nnef").write_text("\n".join(lines) + "\n")
    return folder


def check_close(name: str, got: np.ndarray, want: np.ndarray, who: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{name} ({who}): shape {got.shape} != {want.shape}"
    if want.dtype.kind == "f":
        scale = max(float(np.max(np.abs(want))), 1e-30)
        err = float(np.max(np.abs(got.astype(F64) - want))) / scale
        assert err <= RTOL, f"{name} ({who}): max error {err:.3g} × max|ref|"
    else:
        assert np.array_equal(got, want), f"{name} ({who}): {np.count_nonzero(got != want)} mismatches"


def run_case(tmp_path: Path, name: str, body: str, inputs: dict[str, np.ndarray], outputs: Sequence[str],
             expected: Sequence[np.ndarray], variables: dict[str, np.ndarray] | None = None, fragments: str = "",
             reference: bool = True) -> tf2tosa.TosaModel:
    kinds = {k: (v.shape, "logical" if v.dtype == np.bool_ else "integer" if v.dtype.kind == "i" else "scalar")
             for k, v in inputs.items()}
    folder = write_graph(tmp_path / f"{name}.nnef", body, kinds, outputs, variables, fragments)
    model = tf2tosa.convert(folder)
    model.save(tmp_path / f"{name}.tosa")  # validated by the session's .tosa hook too
    ours = model.run([inputs[k] for k in inputs])
    for o, got, want in zip(outputs, ours.values(), expected):
        check_close(f"{name}:{o}", got, np.asarray(want), "executor")
    if reference and tosa_tools.available():
        arm = tosa_tools.run_reference(model.to_bytes(), [inputs[k] for k in inputs])
        for o, got, want in zip(outputs, arm.values(), expected):
            check_close(f"{name}:{o}", got, np.asarray(want), "Arm reference model")
    return model


# --------------------------------------------------------------------------- numpy from the specification
def pad_nchw(x: np.ndarray, pads: Sequence[tuple[int, int]], value: float) -> np.ndarray:
    width = [(0, 0)] * (x.ndim - len(pads)) + list(pads)
    return np.pad(x, width, constant_values=value)


def auto_pads(size: Sequence[int], kernel: Sequence[int], stride: Sequence[int],
              dilation: Sequence[int]) -> list[tuple[int, int]]:
    """Spec 4.3 ('padding = []'): total = max(0, (ceil(in/stride) − 1)·stride + (k − 1)·d + 1 − in), half before."""
    out = []
    for n, k, s, d in zip(size, kernel, stride, dilation):
        total = max(0, (-(-n // s) - 1) * s + (k - 1) * d + 1 - n)
        out.append((total // 2, total - total // 2))
    return out


def np_conv(x: np.ndarray, w: np.ndarray, bias: np.ndarray | float, stride: Sequence[int],
            pads: Sequence[tuple[int, int]], groups: int, dilation: Sequence[int] = (1, 1)) -> np.ndarray:
    """Spec 4.3 conv: output[n, o, y, x] = Σ_{c in o's group, ky, kx} input[n, c, y·s + ky·d − p, …] ·
    filter[o, c', ky, kx]."""
    x, w = x.astype(F64), w.astype(F64)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    g = groups or c
    xp = pad_nchw(x, pads, 0.0)
    oh = (xp.shape[2] - (kh - 1) * dilation[0] - 1) // stride[0] + 1
    ow = (xp.shape[3] - (kw - 1) * dilation[1] - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    og = o // g
    for oc in range(o):
        grp = oc // og
        for ky in range(kh):
            for kx in range(kw):
                y0, x0 = ky * dilation[0], kx * dilation[1]
                rows = slice(y0, y0 + stride[0] * oh, stride[0])
                cols = slice(x0, x0 + stride[1] * ow, stride[1])
                patch = xp[:, grp * cg:(grp + 1) * cg, rows, cols]
                out[:, oc] += np.einsum("nchw,c->nhw", patch, w[oc, :, ky, kx])
    b = np.asarray(bias, F64).reshape(-1)
    return out + (b.reshape(1, -1, 1, 1) if b.size > 1 else b[0])


def np_deconv(x: np.ndarray, w: np.ndarray, stride: Sequence[int], out_hw: Sequence[int],
              pads: Sequence[tuple[int, int]]) -> np.ndarray:
    """Spec 4.3 deconv (groups 1): each input pixel scatters input[n, c, i, j] · filter[c, o, ky, kx] to
    output[n, o, i·s + ky − p, j·s + kx − p]."""
    x, w = x.astype(F64), w.astype(F64)
    n, c, h, wd = x.shape
    _, o, kh, kw = w.shape
    full = np.zeros((n, o, (h - 1) * stride[0] + kh, (wd - 1) * stride[1] + kw))
    for i in range(h):
        for j in range(wd):
            full[:, :, i * stride[0]:i * stride[0] + kh, j * stride[1]:j * stride[1] + kw] += np.einsum(
                "nc,cokl->nokl", x[:, :, i, j], w)
    top, left = pads[0][0], pads[1][0]
    return full[:, :, top:top + out_hw[0], left:left + out_hw[1]]


def np_pool(x: np.ndarray, size: Sequence[int], stride: Sequence[int], pads: Sequence[tuple[int, int]],
            kind: str, border: str) -> np.ndarray:
    """Spec 4.4 box / max / avg pooling over every dimension; border 'ignore' leaves padding out of the max and
    out of the average's count, 'constant' pads with 0 (and counts it)."""
    x = x.astype(F64)
    fill = np.nan if border == "ignore" else 0.0
    xp = pad_nchw(x, pads, fill)
    outs = [(xp.shape[i] - size[i]) // stride[i] + 1 for i in range(x.ndim)]
    out = np.zeros(outs)
    for idx in np.ndindex(*outs):
        win = xp[tuple(slice(i * s, i * s + k) for i, s, k in zip(idx, stride, size))]
        if kind == "max":
            out[idx] = np.nanmax(win)
        elif kind == "avg":
            out[idx] = np.nanmean(win)
        else:  # box sum
            out[idx] = np.nansum(win)
    return out


def np_resize_linear(x: np.ndarray, f: int) -> np.ndarray:
    """multilinear_upsample, method 'symmetric', border 'replicate' (spec 4.4): output sample i sits at input
    coordinate (i + ½)/f − ½; neighbours beyond the edge repeat the edge value."""
    x = x.astype(F64)
    for axis in (2, 3):
        n = x.shape[axis]
        pos = (np.arange(n * f) + 0.5) / f - 0.5
        lo = np.floor(pos).astype(int)
        t = pos - lo
        a = np.take(x, np.clip(lo, 0, n - 1), axis=axis)
        b = np.take(x, np.clip(lo + 1, 0, n - 1), axis=axis)
        shape = [1] * x.ndim
        shape[axis] = -1
        t = t.reshape(shape)
        x = a * (1 - t) + b * t
    return x


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


# --------------------------------------------------------------------------- cases
RNG = np.random.default_rng(1234)


def rand(*shape: int, lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
    return RNG.uniform(lo, hi, size=shape).astype(np.float32)


def f(a: np.ndarray) -> np.ndarray:
    return a.astype(F64)


X = rand(2, 3, 4, 5)
XP = rand(2, 3, 4, 5, lo=0.1, hi=2.0)  # positive (log, sqrt …)
XU = rand(2, 3, 4, 5, lo=-0.9, hi=0.9)  # inside (−1, 1) (asin, atanh …)
Y = rand(2, 3, 4, 5)
YP = rand(2, 3, 4, 5, lo=0.5, hi=2.0)
B1 = RNG.integers(0, 2, size=(2, 3, 4, 5)).astype(np.bool_)
B2 = RNG.integers(0, 2, size=(2, 3, 4, 5)).astype(np.bool_)
XR = (rand(2, 3, 4, 5) * 4).round(1).astype(np.float32) + np.float32(0.05)  # no exact halves


UNARY: dict[str, tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]] = {
    "copy": (X, lambda x: x), "neg": (X, lambda x: -x), "abs": (X, np.abs), "sign": (X, np.sign),
    "rcp": (YP, lambda x: 1.0 / x), "exp": (X, np.exp), "log": (XP, np.log), "sin": (X, np.sin),
    "cos": (X, np.cos), "tan": (X, np.tan), "sinh": (X, np.sinh), "cosh": (X, np.cosh), "tanh": (X, np.tanh),
    "asin": (XU, np.arcsin), "acos": (XU, np.arccos), "atan": (X, np.arctan), "asinh": (X, np.arcsinh),
    "acosh": (XP + 1.0, np.arccosh), "atanh": (XU, np.arctanh), "floor": (XR, np.floor), "ceil": (XR, np.ceil),
    "round": (XR, lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5)), "sqr": (X, np.square), "sqrt": (XP, np.sqrt),
    "rsqr": (YP, lambda x: 1.0 / x ** 2), "rsqrt": (XP, lambda x: 1.0 / np.sqrt(x)), "log2": (XP, np.log2),
    "sigmoid": (X, sigmoid), "relu": (X, lambda x: np.maximum(x, 0.0)),
    "elu": (X, lambda x: np.where(x < 0, np.exp(x) - 1.0, x)),
    "gelu": (X, lambda x: x * sigmoid(1.702 * x)), "silu": (X, lambda x: x * sigmoid(x)),
    "softplus": (X, lambda x: np.log(np.exp(x) + 1.0)),
}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary(tmp_path: Path, op: str) -> None:
    x, fn = UNARY[op]
    x = x.astype(np.float32)
    run_case(tmp_path, op, f"out = {op}(x);", {"x": x}, ["out"], [fn(f(x))])


BINARY: dict[str, tuple[np.ndarray, np.ndarray, Callable[[np.ndarray, np.ndarray], np.ndarray]]] = {
    "add": (X, Y, np.add), "sub": (X, Y, np.subtract), "mul": (X, Y, np.multiply), "div": (X, YP, np.divide),
    "pow": (XP, Y, np.power), "min": (X, Y, np.minimum), "max": (X, Y, np.maximum),
    "lt": (X, Y, np.less), "gt": (X, Y, np.greater), "le": (X, X, np.less_equal), "ge": (X, Y, np.greater_equal),
    "eq": (X, np.where(B1, X, Y), np.equal), "ne": (X, np.where(B1, X, Y), np.not_equal),
}


@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary(tmp_path: Path, op: str) -> None:
    x, y, fn = BINARY[op]
    run_case(tmp_path, op, f"out = {op}(x, y);", {"x": x, "y": y.astype(np.float32)}, ["out"], [fn(f(x), f(y))])


def test_binary_broadcast_leading(tmp_path: Path) -> None:
    """NNEF broadcasting aligns leading dimensions: a [1, 3] bias adds per channel of [2, 3, 4, 5]."""
    bias = rand(1, 3)
    run_case(tmp_path, "bias", "out = add(x, b);", {"x": X}, ["out"], [f(X) + f(bias).reshape(1, 3, 1, 1)],
             variables={"b": bias})


def test_logical(tmp_path: Path) -> None:
    run_case(tmp_path, "logical", "a = and(p, q); o = or(p, q); n = not(p);", {"p": B1, "q": B2}, ["a", "o", "n"],
             [B1 & B2, B1 | B2, ~B1])


def test_select_clamp_literals(tmp_path: Path) -> None:
    lo, hi = rand(2, 3, 4, 5, lo=-1, hi=0), rand(2, 3, 4, 5, lo=0, hi=1)
    run_case(tmp_path, "select_clamp",
             "c = lt(x, y); s = select(c, x, y); k = clamp(x, -0.25, 0.5); t = clamp(x, lo, hi);",
             {"x": X, "y": Y, "lo": lo, "hi": hi}, ["s", "k", "t"],
             [np.where(f(X) < f(Y), f(X), f(Y)), np.clip(f(X), -0.25, 0.5), np.maximum(np.minimum(f(X), f(hi)), f(lo))])


def test_activations_with_parameters(tmp_path: Path) -> None:
    alpha = rand(1, 3, lo=0.0, hi=0.5)
    run_case(tmp_path, "acts", "l = leaky_relu(x, alpha = 0.2); p = prelu(x, a); e = elu(x, alpha = 0.5);",
             {"x": X}, ["l", "p", "e"],
             [np.where(f(X) < 0, 0.2 * f(X), f(X)), np.where(f(X) < 0, f(alpha).reshape(1, 3, 1, 1) * f(X), f(X)),
              np.where(f(X) < 0, 0.5 * (np.exp(f(X)) - 1), f(X))], variables={"a": alpha})


@pytest.mark.parametrize("axes", [[1], [3], [2, 3]])
def test_softmax(tmp_path: Path, axes: list[int]) -> None:
    ax = tuple(axes)
    e = np.exp(f(X) - np.max(f(X), axis=ax, keepdims=True))
    want = e / np.sum(e, axis=ax, keepdims=True)
    run_case(tmp_path, "softmax", f"out = softmax(x, axes = {axes});", {"x": X}, ["out"], [want])


REDUCE: dict[str, Callable[..., np.ndarray]] = {"sum_reduce": np.sum, "mean_reduce": np.mean,
                                                "max_reduce": np.max, "min_reduce": np.min}


@pytest.mark.parametrize("op", sorted(REDUCE))
def test_reduce(tmp_path: Path, op: str) -> None:
    run_case(tmp_path, op, f"out = {op}(x, axes = [1, 3]);", {"x": X}, ["out"],
             [REDUCE[op](f(X), axis=(1, 3), keepdims=True)])


def test_sum_reduce_normalize(tmp_path: Path) -> None:
    run_case(tmp_path, "sum_norm", "out = sum_reduce(x, axes = [0, 2], normalize = true);", {"x": X}, ["out"],
             [np.mean(f(X), axis=(0, 2), keepdims=True)])


def test_gather(tmp_path: Path) -> None:
    """gather along an axis with integer indices."""
    idx = np.array([[2, 0], [1, 1]], np.int32)
    run_case(tmp_path, "gather", "out = gather(x, i, axis = 2);", {"x": X, "i": idx}, ["out"],
             [np.take(f(X), idx, axis=2)])


def test_argmax_reduce(tmp_path: Path) -> None:
    run_case(tmp_path, "argmax", "out = argmax_reduce(x, axes = [2]);", {"x": X}, ["out"],
             [np.argmax(X, axis=2)[:, :, None, :].astype(np.int32)])


def test_reshape_family(tmp_path: Path) -> None:
    run_case(tmp_path, "reshape",
             "m = mean_reduce(x, axes = [2]); r = reshape(x, shape = [0, -1, 5]); s = squeeze(m, axes = [2]);"
             " u = unsqueeze(x, axes = [0, 5]);",
             {"x": X}, ["r", "s", "u"],
             [f(X).reshape(2, 12, 5), np.mean(f(X), axis=2), f(X).reshape(1, 2, 3, 4, 5, 1)])


def test_transpose_concat_stack(tmp_path: Path) -> None:
    run_case(tmp_path, "layout",
             "t = transpose(x, axes = [0, 2, 3, 1]); c = concat([x, y], axis = 1); s = stack([x, y], axis = 2);",
             {"x": X, "y": Y}, ["t", "c", "s"],
             [np.transpose(f(X), (0, 2, 3, 1)), np.concatenate([f(X), f(Y)], 1), np.stack([f(X), f(Y)], 2)])


def test_split_unstack(tmp_path: Path) -> None:
    run_case(tmp_path, "split", "[a, b] = split(x, axis = 3, ratios = [2, 3]); [p, q] = unstack(x, axis = 0);",
             {"x": X}, ["a", "b", "p", "q"], [f(X)[..., :2], f(X)[..., 2:], f(X)[0], f(X)[1]])


def test_slice_tile(tmp_path: Path) -> None:
    run_case(tmp_path, "slice",
             "s = slice(x, axes = [1, 3], begin = [1, -4], end = [3, 0]); t = tile(x, repeats = [1, 2, 1, 3]);",
             {"x": X}, ["s", "t"], [f(X)[:, 1:3, :, 1:], np.tile(f(X), (1, 2, 1, 3))])


@pytest.mark.parametrize("border,mode", [("constant", "constant"), ("reflect", "reflect"), ("replicate", "edge")])
def test_pad(tmp_path: Path, border: str, mode: str) -> None:
    run_case(tmp_path, f"pad_{border}",
             f"out = pad(x, padding = [(0, 0), (0, 0), (1, 2), (2, 1)], border = '{border}');",
             {"x": X}, ["out"], [np.pad(f(X), [(0, 0), (0, 0), (1, 2), (2, 1)], mode=mode)])


CONV_X = rand(1, 4, 7, 6)


@pytest.mark.parametrize("groups,stride,padding", [
    (1, [1, 1], "[]"), (1, [2, 2], "[]"), (1, [2, 1], "[(1, 0), (2, 1)]"), (2, [1, 1], "[(1, 1), (1, 1)]"),
    (0, [1, 1], "[]"), (0, [2, 2], "[(0, 0), (0, 0)]")])
def test_conv(tmp_path: Path, groups: int, stride: list[int], padding: str) -> None:
    g = groups or 4
    w = rand(8, 4 // g, 3, 3)
    bias = rand(1, 8)
    pads = auto_pads((7, 6), (3, 3), stride, (1, 1)) if padding == "[]" else eval(padding)  # noqa: S307
    want = np_conv(CONV_X, w, bias, stride, pads, groups)
    run_case(tmp_path, f"conv_g{groups}",
             f"out = conv(x, w, b, stride = {stride}, padding = {padding}, groups = {groups});",
             {"x": CONV_X}, ["out"], [want], variables={"w": w, "b": bias})


def test_conv_dilated_no_bias(tmp_path: Path) -> None:
    w = rand(5, 4, 3, 2)
    want = np_conv(CONV_X, w, 0.0, (1, 1), [(0, 0), (0, 0)], 1, dilation=(2, 1))
    run_case(tmp_path, "conv_dil", "out = conv(x, w, 0.0, padding = [(0, 0), (0, 0)], dilation = [2, 1]);",
             {"x": CONV_X}, ["out"], [want], variables={"w": w})


@pytest.mark.parametrize("padding", ["[]", "[(0, 0), (0, 0)]"])
def test_deconv(tmp_path: Path, padding: str) -> None:
    x = rand(1, 4, 3, 4)
    w = rand(4, 6, 3, 3)
    if padding == "[]":
        out_hw = (6, 8)
        total = [max(0, (3 - 1) * 2 + 3 - 6), max(0, (4 - 1) * 2 + 3 - 8)]
        pads = [(t // 2, t - t // 2) for t in total]
    else:
        out_hw = (7, 9)
        pads = [(0, 0), (0, 0)]
    want = np_deconv(x, w, (2, 2), out_hw, pads)
    run_case(tmp_path, "deconv", f"out = deconv(x, w, 0.0, stride = [2, 2], padding = {padding}, "
             f"output_shape = [1, 6, {out_hw[0]}, {out_hw[1]}]);", {"x": x}, ["out"], [want], variables={"w": w})


def test_deconv_grouped(tmp_path: Path) -> None:
    """groups = 2: input channels 0-1 feed output channels 0-2 through filter rows 0-1, channels 2-3 the rest."""
    x = rand(1, 4, 3, 3)
    w = rand(4, 3, 2, 2)
    bias = rand(1, 6)
    want = np.concatenate([np_deconv(x[:, :2], w[:2], (2, 2), (6, 6), [(0, 0), (0, 0)]),
                           np_deconv(x[:, 2:], w[2:], (2, 2), (6, 6), [(0, 0), (0, 0)])], axis=1)
    want = want + f(bias).reshape(1, 6, 1, 1)
    run_case(tmp_path, "deconv_g2", "out = deconv(x, w, b, stride = [2, 2], padding = [(0, 0), (0, 0)], groups = 2);",
             {"x": x}, ["out"], [want], variables={"w": w, "b": bias})


POOL_X = rand(1, 3, 6, 7)


@pytest.mark.parametrize("op,border,padding", [
    ("max_pool", "ignore", "[]"), ("max_pool", "constant", "[(0, 0), (0, 0), (1, 1), (0, 1)]"),
    ("avg_pool", "ignore", "[]"), ("avg_pool", "constant", "[(0, 0), (0, 0), (1, 0), (1, 1)]"),
    ("box", "constant", "[(0, 0), (0, 0), (0, 0), (0, 0)]"),
    ("rms_pool", "ignore", "[(0, 0), (0, 0), (0, 0), (0, 0)]")])
def test_pool(tmp_path: Path, op: str, border: str, padding: str) -> None:
    size, stride = (1, 1, 3, 2), (1, 1, 2, 2)
    pads = ([(0, 0), (0, 0)] + auto_pads((6, 7), (3, 2), (2, 2), (1, 1))) if padding == "[]" else eval(padding)  # noqa: S307
    x = POOL_X
    if op == "rms_pool":
        want = np.sqrt(np_pool(f(x) ** 2, size, stride, pads, "avg", border))
    else:
        want = np_pool(x, size, stride, pads, {"max_pool": "max", "avg_pool": "avg", "box": "sum"}[op], border)
    run_case(tmp_path, op, f"out = {op}(x, size = {list(size)}, stride = {list(stride)}, padding = {padding}, "
             f"border = '{border}');", {"x": x}, ["out"], [want])


def test_resampling(tmp_path: Path) -> None:
    x = rand(1, 3, 4, 6)
    near_up = np.repeat(np.repeat(f(x), 2, axis=2), 3, axis=3)
    near_down = f(x)[:, :, ::2, ::3]
    area = f(x).reshape(1, 3, 2, 2, 2, 3).mean(axis=(3, 5))
    run_case(tmp_path, "resample",
             "u = nearest_upsample(x, factor = [2, 3]); d = nearest_downsample(x, factor = [2, 3]);"
             " a = area_downsample(x, factor = [2, 3]); l = multilinear_upsample(x, factor = [2, 2]);",
             {"x": x}, ["u", "d", "a", "l"], [near_up, near_down, area, np_resize_linear(x, 2)])


def test_linear_matmul(tmp_path: Path) -> None:
    a, w, bias = rand(3, 5), rand(4, 5), rand(1, 4)
    m1, m2 = rand(2, 3, 5), rand(2, 4, 5)
    run_case(tmp_path, "linear", "l = linear(a, w, b); m = matmul(p, q, transposeB = true);",
             {"a": a, "p": m1, "q": m2}, ["l", "m"],
             [f(a) @ f(w).T + f(bias), f(m1) @ np.swapaxes(f(m2), 1, 2)], variables={"w": w, "b": bias})


def test_normalizations(tmp_path: Path) -> None:
    mean, var = rand(1, 3), rand(1, 3, lo=0.5, hi=1.5)
    off, sc = rand(1, 3), rand(1, 3)
    ch = (1, 3, 1, 1)
    bn = f(off).reshape(ch) + f(sc).reshape(ch) * (f(X) - f(mean).reshape(ch)) / np.sqrt(f(var).reshape(ch) + 1e-3)
    l1 = f(X) / np.maximum(np.sum(np.abs(f(X)), axis=(1,), keepdims=True) + 0.1, 1e-6)
    l2 = f(X) / np.maximum(np.sqrt(np.sum(f(X) ** 2, axis=(2, 3), keepdims=True)) + 0.0, 1e-6)
    sq = np.pad(f(X) ** 2, [(0, 0), (1, 1), (0, 0), (0, 0)])
    window = sum(sq[:, i:i + 3] for i in range(3)) / 3.0
    lrn = f(X) / (2.0 + 0.1 * window) ** 0.75
    run_case(tmp_path, "norms",
             "n = batch_normalization(x, mean, var, off, sc, epsilon = 0.001);"
             " a = l1_normalization(x, axes = [1], bias = 0.1, epsilon = 0.000001);"
             " c = l2_normalization(x, axes = [2, 3], epsilon = 0.000001);"
             " r = local_response_normalization(x, size = [1, 3, 1, 1], alpha = 0.1, beta = 0.75, bias = 2.0);",
             {"x": X}, ["n", "a", "c", "r"], [bn, l1, l2, lrn],
             variables={"mean": mean, "var": var, "off": off, "sc": sc})


def test_quantize_ops(tmp_path: Path) -> None:
    """linear_quantize and logarithmic_quantize as float operations (their fragment bodies, spec 4.9.5)."""
    x = rand(2, 3, 4, 5, lo=-2, hi=2)
    r = 2.0 ** 4 - 1
    z = np.clip(f(x), -1.0, 1.5)
    lin = np.round((z + 1.0) / 2.5 * r) / r * 2.5 - 1.0
    xl = rand(2, 3, 4, 5, lo=0.3, hi=3.0) * np.where(RNG.random((2, 3, 4, 5)) < 0.5, -1, 1).astype(np.float32)
    m = np.ceil(np.log2(2.0))
    q = np.clip(np.log2(np.abs(f(xl))), m - r, m)
    q = np.sign(q) * np.floor(np.abs(q) + 0.5)
    log = np.sign(f(xl)) * 2.0 ** q
    run_case(tmp_path, "quantize",
             "l = linear_quantize(x, -1.0, 1.5, bits = 4); g = logarithmic_quantize(y, 2.0, bits = 4);",
             {"x": x, "y": xl.astype(np.float32)}, ["l", "g"], [lin, log])


# --------------------------------------------------------------------------- fragments
FRAGMENTS = """
fragment relu6( x: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    y = clamp(x, 0.0, 6.0);
}
fragment scaled_tanh( x: tensor<scalar>, s: scalar = 2.0 ) -> ( y: tensor<scalar> )
{
    y = s * tanh(x / s);
}
fragment block( x: tensor<scalar>, w: tensor<scalar> ) -> ( y: tensor<scalar>, z: tensor<scalar> )
{
    c = conv(x, w, 0.0, padding = [(1, 1), (1, 1)]);
    y = scaled_tanh(c, s = 3.0) + x;
    z = relu6(y);
}
"""


def test_user_fragments_nested(tmp_path: Path) -> None:
    """A graph that defines its own fragments, nested (block → scaled_tanh, relu6), with defaults and tuples."""
    x = rand(1, 4, 5, 5, lo=-4, hi=4)
    w = rand(4, 4, 3, 3)
    c = np_conv(x, w, 0.0, (1, 1), [(1, 1), (1, 1)], 1)
    y = 3.0 * np.tanh(c / 3.0) + f(x)
    run_case(tmp_path, "fragments", "a, b = block(x, w);", {"x": x}, ["a", "b"], [y, np.clip(y, 0.0, 6.0)],
             variables={"w": w}, fragments=FRAGMENTS)


def test_layout_pass_cancels_transposes(tmp_path: Path) -> None:
    """conv → relu → conv → max_pool in NCHW: every NCHW↔NHWC pair between layers cancels (0 TRANSPOSE left)."""
    x = rand(1, 4, 8, 8)
    w1, w2 = rand(6, 4, 3, 3), rand(6, 6, 1, 1)
    c1 = np.maximum(np_conv(x, w1, 0.0, (1, 1), [(1, 1), (1, 1)], 1), 0.0)
    c2 = np_conv(c1.astype(np.float32), w2, 0.0, (1, 1), [(0, 0), (0, 0)], 1)
    p = np_pool(c2, (1, 1, 2, 2), (1, 1, 2, 2), [(0, 0)] * 4, "max", "ignore")
    m = run_case(tmp_path, "layout_pass",
                 "a = conv(x, w1, 0.0, padding = [(1, 1), (1, 1)]); r = relu(a); c = conv(r, w2, 0.0);"
                 " out = max_pool(c, size = [1, 1, 2, 2], stride = [1, 1, 2, 2], border = 'ignore');",
                 {"x": x}, ["out"], [p], variables={"w1": w1, "w2": w2})
    layout = m.graph.record.layout
    assert layout == {"transposes_before": 6, "transposes_after": 2}  # only the graph's input and output remain
    assert sum(op.name == "tosa.TRANSPOSE" for op in m.graph.ops.values()) == 2


def test_logarithmic_quantization_in_graph_quant(tmp_path: Path) -> None:
    """A ``graph.quant`` logarithmic entry: the tensor is followed by logarithmic_quantize (it stays float)."""
    x = rand(2, 3, 4, 5, lo=0.3, hi=3.0) * np.where(RNG.random((2, 3, 4, 5)) < 0.5, -1, 1).astype(np.float32)
    folder = write_graph(tmp_path / "logq.nnef", "y = neg(x);", {"x": ((2, 3, 4, 5), "scalar")}, ["y"])
    (folder / "graph.quant").write_text('"x": logarithmic_quantize(max = 2.0, bits = 3);\n')
    q = np.clip(np.log2(np.abs(f(x))), 1.0 - 7.0, 1.0)
    q = np.sign(q) * np.floor(np.abs(q) + 0.5)
    want = -(np.sign(f(x)) * 2.0 ** q)
    model = tf2tosa.convert(folder)
    check_close("logq", list(model.run([x]).values())[0], want, "executor")
    if tosa_tools.available():
        check_close("logq", list(tosa_tools.run_reference(model.to_bytes(), [x]).values())[0], want, "Arm")


@pytest.mark.parametrize("stride,padding,border", [((2, 2), "[(0, 0), (0, 0), (0, 0), (0, 0)]", "constant"),
                                                   ((1, 2), "[(0, 0), (0, 0), (1, 1), (0, 1)]", "ignore")])
def test_argmax_pool(tmp_path: Path, stride: tuple[int, int], padding: str, border: str) -> None:
    """argmax_pool: the row-major index of the window's maximum (spec 4.4), first one on ties."""
    x = POOL_X
    pads = eval(padding)  # noqa: S307
    xp = pad_nchw(f(x), pads, -np.inf if border == "ignore" else 0.0)
    oh = (xp.shape[2] - 3) // stride[0] + 1
    ow = (xp.shape[3] - 2) // stride[1] + 1
    want = np.zeros((1, 3, oh, ow), np.int32)
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * stride[0]:i * stride[0] + 3, j * stride[1]:j * stride[1] + 2]
            want[:, :, i, j] = np.argmax(win.reshape(1, 3, -1), axis=2)
    run_case(tmp_path, "argmax_pool", f"out = argmax_pool(x, size = [1, 1, 3, 2], stride = [1, 1, {stride[0]}, "
             f"{stride[1]}], padding = {padding}, border = '{border}');", {"x": x}, ["out"], [want])


# --------------------------------------------------------------------------- 1-D windows (rank-3 NCW, as audio models)
def np_conv1d(x: np.ndarray, w: np.ndarray, bias: np.ndarray | float, stride: int, pad: tuple[int, int],
              groups: int, dilation: int = 1) -> np.ndarray:
    """Spec 4.3 conv with one spatial dimension: output[n, o, i] = Σ_{c in o's group, k}
    input[n, c, i·s + k·d − p] · filter[o, c', k] (+ bias[o]), zero outside the input."""
    x, w = x.astype(F64), w.astype(F64)
    n, c, length = x.shape
    o, cg, kw = w.shape
    g = groups or c
    xp = np.pad(x, [(0, 0), (0, 0), pad])
    out_len = (xp.shape[2] - (kw - 1) * dilation - 1) // stride + 1
    out = np.zeros((n, o, out_len))
    for oc in range(o):
        grp = oc // (o // g)
        for i in range(out_len):
            for k in range(kw):
                out[:, oc, i] += xp[:, grp * cg:(grp + 1) * cg, i * stride + k * dilation] @ w[oc, :, k]
    bb = np.asarray(bias, F64).reshape(-1)
    return out + (bb.reshape(1, -1, 1) if bb.size > 1 else bb[0])


def np_deconv1d(x: np.ndarray, w: np.ndarray, stride: int, out_len: int, pad_before: int) -> np.ndarray:
    """Spec 4.3 deconv, one spatial dimension: input[n, c, i] · filter[c, o, k] adds to output[n, o, i·s + k − p]."""
    x, w = x.astype(F64), w.astype(F64)
    n, c, length = x.shape
    _, o, kw = w.shape
    full = np.zeros((n, o, (length - 1) * stride + kw))
    for i in range(length):
        full[:, :, i * stride:i * stride + kw] += np.einsum("nc,cok->nok", x[:, :, i], w)
    return full[:, :, pad_before:pad_before + out_len]


X1 = rand(2, 4, 11)


@pytest.mark.parametrize("groups,stride,padding,dilation", [
    (1, 1, "[]", 1), (1, 2, "[]", 1), (2, 2, "[(2, 1)]", 1), (0, 1, "[(0, 0)]", 2), (1, 3, "[(1, 2)]", 2)])
def test_conv_1d(tmp_path: Path, groups: int, stride: int, padding: str, dilation: int) -> None:
    g = groups or 4
    w = rand(8, 4 // g, 3)
    bias = rand(1, 8)
    pad = auto_pads((11,), (3,), (stride,), (dilation,))[0] if padding == "[]" else eval(padding)[0]  # noqa: S307
    want = np_conv1d(X1, w, bias, stride, pad, groups, dilation)
    run_case(tmp_path, f"conv1d_g{groups}_s{stride}",
             f"out = conv(x, w, b, stride = [{stride}], dilation = [{dilation}], padding = {padding}, "
             f"groups = {groups});", {"x": X1}, ["out"], [want], variables={"w": w, "b": bias})


@pytest.mark.parametrize("padding", ["[]", "[(0, 0)]"])
def test_deconv_1d(tmp_path: Path, padding: str) -> None:
    x = rand(1, 4, 5)
    w = rand(4, 3, 4)
    if padding == "[]":
        out_len = 10
        total = max(0, (5 - 1) * 2 + 4 - 10)
        before = total // 2
    else:
        out_len, before = 12, 0
    want = np_deconv1d(x, w, 2, out_len, before)
    run_case(tmp_path, "deconv1d", f"out = deconv(x, w, 0.0, stride = [2], padding = {padding}, "
             f"output_shape = [1, 3, {out_len}]);", {"x": x}, ["out"], [want], variables={"w": w})


@pytest.mark.parametrize("op,border,padding", [
    ("max_pool", "ignore", "[]"), ("avg_pool", "constant", "[(0, 0), (0, 0), (1, 1)]"),
    ("avg_pool", "ignore", "[]"), ("box", "constant", "[(0, 0), (0, 0), (0, 0)]")])
def test_pool_1d(tmp_path: Path, op: str, border: str, padding: str) -> None:
    size, stride = (1, 1, 3), (1, 1, 2)
    pads = [(0, 0), (0, 0)] + auto_pads((11,), (3,), (2,), (1,)) if padding == "[]" else eval(padding)  # noqa: S307
    want = np_pool(X1, size, stride, pads, {"max_pool": "max", "avg_pool": "avg", "box": "sum"}[op], border)
    run_case(tmp_path, f"{op}1d", f"out = {op}(x, size = {list(size)}, stride = {list(stride)}, padding = {padding}, "
             f"border = '{border}');", {"x": X1}, ["out"], [want])


def test_argmax_pool_1d(tmp_path: Path) -> None:
    """argmax_pool over one spatial dimension: the index of the window's first maximum."""
    want = np.zeros((2, 4, 5), np.int32)  # (11 − 3) // 2 + 1 windows
    for i in range(5):
        want[:, :, i] = np.argmax(X1[:, :, i * 2:i * 2 + 3], axis=2)
    run_case(tmp_path, "argmax_pool1d", "out = argmax_pool(x, size = [1, 1, 3], stride = [1, 1, 2], "
             "padding = [(0, 0), (0, 0), (0, 0)]);", {"x": X1}, ["out"], [want])


def _zp_quant(name: str, scale: float, zp: int) -> str:
    return (f'"{name}": zero_point_linear_quantize(zero_point = {zp}, scale = {scale}, bits = 8, signed = true, '
            'symmetric = false);\n')


def _q8(v: np.ndarray, scale: float, zp: int) -> np.ndarray:
    """Spec 4.9.5 linear quantization to signed 8 bits: round(v / scale) + zero point, clamped."""
    q = v / scale
    return np.clip(np.sign(q) * np.floor(np.abs(q) + 0.5) + zp, -128, 127).astype(np.int8)


def _within_one_step(model: tf2tosa.TosaModel, x: np.ndarray, want: np.ndarray, name: str) -> None:
    """The int8 result of our executor and of the Arm reference model (when installed) is within one quantization
    step of ``want`` everywhere."""
    runs = [("executor", list(model.run([x]).values())[0])]
    if tosa_tools.available():
        runs.append(("Arm reference model", list(tosa_tools.run_reference(model.to_bytes(), [x]).values())[0]))
    for who, got in runs:
        assert got.dtype == np.int8 and got.shape == want.shape, who
        diff = np.abs(got.astype(np.int32) - want.astype(np.int32))
        assert int(diff.max()) <= 1, f"{name} ({who}): {int(np.count_nonzero(diff > 1))} values off by more than 1"


@pytest.mark.parametrize("op", ["conv", "max_pool", "avg_pool"])
def test_int8_1d(tmp_path: Path, op: str) -> None:
    """Quantized (graph.quant) 1-D windows: the integer result is within one step of the spec's float
    operation on the dequantized tensors, quantized to the output's parameters (requantization rounding is the
    TFLite kernels')."""
    sx, zx, sw, so, zo = 0.02, 3, 0.01, 0.05, -4
    x = np.asarray(RNG.integers(-128, 128, size=(1, 4, 9)), np.int8)
    xf = (x.astype(F64) - zx) * sx
    w = rand(6, 4, 3)
    wq = _q8(f(w), sw, 0)
    if op == "conv":
        body = "out = conv(x, w, 0.0, stride = [2], padding = [(1, 1)]);"
        want_f = np_conv1d(xf, (wq.astype(F64) * sw).astype(np.float32), 0.0, 2, (1, 1), 1)
        quant = _zp_quant("x", sx, zx) + _zp_quant("w", sw, 0) + _zp_quant("out", so, zo)
    else:
        body = f"out = {op}(x, size = [1, 1, 3], stride = [1, 1, 2], padding = [(0, 0), (0, 0), (0, 0)]);"
        want_f = np_pool(xf, (1, 1, 3), (1, 1, 2), [(0, 0)] * 3, op[:3], "constant")
        so, zo = sx, zx  # pools keep the input's quantization
        quant = _zp_quant("x", sx, zx) + _zp_quant("out", so, zo)
    folder = write_graph(tmp_path / f"q{op}1d.nnef", body, {"x": ((1, 4, 9), "scalar")}, ["out"],
                         {"w": w} if op == "conv" else None)
    (folder / "graph.quant").write_text(quant)
    want = _q8(want_f, so, zo)
    model = tf2tosa.convert(folder)
    model.save(tmp_path / f"q{op}1d.tosa")
    _within_one_step(model, x, want, f"q{op}1d")


# --------------------------------------------------------------------------- border modes (spec 4.3 "Border Modes")
def np_border(x: np.ndarray, pads: Sequence[tuple[int, int]], border: str) -> np.ndarray:
    """The spec's extended input, dimension by dimension (pads align with the trailing dimensions):
    replicate input[0] / input[z−1]; reflect input[−i] / input[z−1−(i−z+1)]; reflect-even input[−i−1] /
    input[z−1−(i−z)]."""
    x = x.astype(F64)
    first = x.ndim - len(pads)
    for k, (lo, hi) in enumerate(pads):
        axis = first + k
        z = x.shape[axis]
        idx = []
        for i in range(-lo, z + hi):
            if 0 <= i < z:
                idx.append(i)
            elif border == "replicate":
                idx.append(0 if i < 0 else z - 1)
            elif border == "reflect":
                idx.append(-i if i < 0 else z - 1 - (i - z + 1))
            else:
                idx.append(-i - 1 if i < 0 else z - 1 - (i - z))
        x = np.take(x, idx, axis=axis)
    return x


@pytest.mark.parametrize("border", ["replicate", "reflect", "reflect-even"])
def test_conv_border(tmp_path: Path, border: str) -> None:
    w = rand(5, 4, 3, 3)
    bias = rand(1, 5)
    pads = [(2, 1), (1, 2)]
    want = np_conv(np_border(CONV_X, pads, border), w, bias, (2, 1), [(0, 0), (0, 0)], 1)
    run_case(tmp_path, f"conv_{border}", f"out = conv(x, w, b, stride = [2, 1], padding = {pads}, "
             f"border = '{border}');", {"x": CONV_X}, ["out"], [want], variables={"w": w, "b": bias})


def test_conv_1d_border_auto_padding(tmp_path: Path) -> None:
    """Automatic padding (spec 4.3: half before) extended with 'reflect' on a rank-3 input."""
    w = rand(6, 4, 4)
    pad = auto_pads((11,), (4,), (1,), (1,))[0]
    want = np_conv1d(np_border(X1, [pad], "reflect").astype(np.float32), w, 0.0, 1, (0, 0), 1)
    run_case(tmp_path, "conv1d_reflect", "out = conv(x, w, 0.0, border = 'reflect');", {"x": X1}, ["out"], [want],
             variables={"w": w})


@pytest.mark.parametrize("op,border", [("max_pool", "replicate"), ("avg_pool", "reflect"), ("box", "reflect-even"),
                                       ("rms_pool", "replicate"), ("max_pool", "ignore"), ("avg_pool", "ignore"),
                                       ("rms_pool", "ignore")])
def test_pool_border(tmp_path: Path, op: str, border: str) -> None:
    size, stride = (1, 1, 3, 2), (1, 1, 2, 1)
    pads = [(0, 0), (0, 0), (2, 1), (1, 1)]  # not the automatic padding
    x = POOL_X
    if border == "ignore":  # left out of the max and of the average's count
        want = np_pool(f(x) ** 2 if op == "rms_pool" else x, size, stride, pads, op[:3].replace("rms", "avg"),
                       "ignore")
        want = np.sqrt(want) if op == "rms_pool" else want
    else:
        ext = np_border(x, pads, border)
        kind = {"max_pool": "max", "avg_pool": "avg", "box": "sum", "rms_pool": "avg"}[op]
        want = np_pool(ext ** 2 if op == "rms_pool" else ext, size, stride, [(0, 0)] * 4, kind, "constant")
        want = np.sqrt(want) if op == "rms_pool" else want
    run_case(tmp_path, f"{op}_{border}", f"out = {op}(x, size = {list(size)}, stride = {list(stride)}, "
             f"padding = {pads}, border = '{border}');", {"x": x}, ["out"], [want])


def test_argmax_pool_border(tmp_path: Path) -> None:
    pads = [(0, 0), (0, 0), (1, 1), (1, 0)]
    xp = np_border(POOL_X, pads, "reflect")
    oh, ow = (xp.shape[2] - 3) // 2 + 1, xp.shape[3] - 2 + 1
    want = np.zeros((1, 3, oh, ow), np.int32)
    for i in range(oh):
        for j in range(ow):
            want[:, :, i, j] = np.argmax(xp[:, :, 2 * i:2 * i + 3, j:j + 2].reshape(1, 3, -1), axis=2)
    run_case(tmp_path, "argmax_pool_reflect", f"out = argmax_pool(x, size = [1, 1, 3, 2], stride = [1, 1, 2, 1], "
             f"padding = {pads}, border = 'reflect');", {"x": POOL_X}, ["out"], [want])


# --------------------------------------------------------------------------- 3-D convolution (rank-5 NCDHW)
def np_conv3d(x: np.ndarray, w: np.ndarray, bias: np.ndarray | float, stride: Sequence[int],
              dilation: Sequence[int]) -> np.ndarray:
    """Spec 4.3 conv, three spatial dimensions, on an already padded input: output[n, o, i, j, k] =
    Σ_{c, a, b, e} input[n, c, i·s₀ + a·d₀, j·s₁ + b·d₁, k·s₂ + e·d₂] · filter[o, c, a, b, e] + bias[o]."""
    x, w = x.astype(F64), w.astype(F64)
    o, _, *ks = w.shape
    outs = [(x.shape[2 + i] - (ks[i] - 1) * dilation[i] - 1) // stride[i] + 1 for i in range(3)]
    out = np.zeros((x.shape[0], o, *outs))
    for a, bb, e in np.ndindex(*ks):
        patch = x[:, :, a * dilation[0]::stride[0], bb * dilation[1]::stride[1], e * dilation[2]::stride[2]]
        patch = patch[:, :, :outs[0], :outs[1], :outs[2]]
        out += np.einsum("ncdhw,oc->nodhw", patch, w[:, :, a, bb, e])
    bv = np.asarray(bias, F64).reshape(-1)
    return out + (bv.reshape(1, -1, 1, 1, 1) if bv.size > 1 else bv[0])


@pytest.mark.parametrize("padding,border", [("[]", "constant"), ("[(1, 0), (0, 1), (1, 1)]", "constant"),
                                            ("[(1, 1), (1, 0), (0, 2)]", "replicate"),
                                            ("[(0, 0), (0, 0), (0, 0)]", "constant")])
def test_conv_3d(tmp_path: Path, padding: str, border: str) -> None:
    x = rand(1, 3, 5, 6, 4)
    w = rand(4, 3, 2, 3, 2)
    bias = rand(1, 4)
    stride, dil = (2, 1, 1), (1, 1, 2)
    pads = auto_pads((5, 6, 4), (2, 3, 2), stride, dil) if padding == "[]" else eval(padding)  # noqa: S307
    xp = np_border(x, pads, border) if border != "constant" else pad_nchw(f(x), pads, 0.0)
    want = np_conv3d(xp, w, bias, stride, dil)
    run_case(tmp_path, "conv3d", f"out = conv(x, w, b, stride = {list(stride)}, dilation = {list(dil)}, "
             f"padding = {padding}, border = '{border}');", {"x": x}, ["out"], [want], variables={"w": w, "b": bias})


def test_int8_grouped_deconv(tmp_path: Path) -> None:
    """Quantized deconv with groups = 2 and an int32 bias (scale = input scale × filter scale): within one step of
    the spec's float deconv of the dequantized tensors, quantized to the output's parameters."""
    sx, zx, sw, so, zo = 0.03, -2, 0.01, 0.02, 5
    x = np.asarray(RNG.integers(-128, 128, size=(1, 4, 3, 3)), np.int8)
    xf = (x.astype(F64) - zx) * sx
    w = rand(4, 3, 2, 2)
    bias = rand(1, 6, lo=-0.3, hi=0.3)
    wf = _q8(f(w), sw, 0).astype(F64) * sw
    bf = np.round(f(bias) / (sx * sw)) * (sx * sw)
    want_f = np.concatenate([np_deconv(xf[:, :2], wf[:2], (2, 2), (6, 6), [(0, 0), (0, 0)]),
                             np_deconv(xf[:, 2:], wf[2:], (2, 2), (6, 6), [(0, 0), (0, 0)])], axis=1)
    want = _q8(want_f + bf.reshape(1, 6, 1, 1), so, zo)
    folder = write_graph(tmp_path / "qdeconv_g2.nnef",
                         "out = deconv(x, w, b, stride = [2, 2], padding = [(0, 0), (0, 0)], groups = 2);",
                         {"x": ((1, 4, 3, 3), "scalar")}, ["out"], {"w": w, "b": bias})
    (folder / "graph.quant").write_text(
        _zp_quant("x", sx, zx) + _zp_quant("w", sw, 0) + _zp_quant("out", so, zo)
        + f'"b": zero_point_linear_quantize(zero_point = 0, scale = {sx * sw}, bits = 32, signed = true, '
          'symmetric = false);\n')
    model = tf2tosa.convert(folder)
    model.save(tmp_path / "qdeconv_g2.tosa")
    _within_one_step(model, x, want, "qdeconv_g2")


@pytest.mark.parametrize("border", ["constant", "ignore"])
def test_int8_argmax_pool(tmp_path: Path, border: str) -> None:
    """argmax_pool of a quantized tensor: the index of the first maximum of the dequantized window (spec 4.4),
    padding with 0.0 for 'constant' and left out for 'ignore'; the window of all −128 tells them apart."""
    sx, zx = 0.1, 7
    x = np.asarray(RNG.integers(-128, 128, size=(1, 2, 6, 5)), np.int8)
    x[0, 0, :3, :3] = -128
    pads = [(0, 0), (0, 0), (1, 1), (1, 0)]
    xf = pad_nchw((x.astype(F64) - zx) * sx, pads, -np.inf if border == "ignore" else 0.0)
    oh, ow = (xf.shape[2] - 3) // 2 + 1, (xf.shape[3] - 2) // 1 + 1
    want = np.zeros((1, 2, oh, ow), np.int32)
    for i in range(oh):
        for j in range(ow):
            want[:, :, i, j] = np.argmax(xf[:, :, 2 * i:2 * i + 3, j:j + 2].reshape(1, 2, -1), axis=2)
    folder = write_graph(tmp_path / f"qargmax_{border}.nnef", f"out = argmax_pool(x, size = [1, 1, 3, 2], "
                         f"stride = [1, 1, 2, 1], padding = {pads}, border = '{border}');",
                         {"x": ((1, 2, 6, 5), "scalar")}, ["out"])
    (folder / "graph.quant").write_text(_zp_quant("x", sx, zx))
    model = tf2tosa.convert(folder)
    model.save(tmp_path / f"qargmax_{border}.tosa")
    check_close("qargmax", list(model.run([x]).values())[0], want, "executor")
    if tosa_tools.available():
        check_close("qargmax", list(tosa_tools.run_reference(model.to_bytes(), [x]).values())[0], want, "Arm")


@pytest.mark.parametrize("axes", [[2, 3], [1, 3]])
def test_int8_softmax_axes(tmp_path: Path, axes: list[int]) -> None:
    """softmax over several axes of a quantized tensor (spec: exp(x − max) / sum over all the axes), within one
    step of the float softmax of the dequantized input quantized to the output's parameters (1/256, −128)."""
    sx, zx = 0.05, -3
    x = np.asarray(RNG.integers(-128, 128, size=(2, 3, 4, 5)), np.int8)
    xf = (x.astype(F64) - zx) * sx
    e = np.exp(xf - xf.max(axis=tuple(axes), keepdims=True))
    want = _q8(e / e.sum(axis=tuple(axes), keepdims=True), 1 / 256, -128)
    folder = write_graph(tmp_path / "qsoftmax.nnef", f"out = softmax(x, axes = {axes});",
                         {"x": ((2, 3, 4, 5), "scalar")}, ["out"])
    (folder / "graph.quant").write_text(_zp_quant("x", sx, zx) + _zp_quant("out", 1 / 256, -128))
    model = tf2tosa.convert(folder)
    model.save(tmp_path / "qsoftmax.tosa")
    _within_one_step(model, x, want, "qsoftmax")


# --------------------------------------------------------------------------- sample / desample / debox (spec 4.3)
SAMPLE_CASES = [((3, 2), (2, 1), (1, 1), [(1, 1), (0, 1)], "constant"), ((2, 2), (2, 2), (1, 1), [(0, 0), (0, 0)],
                                                                          "constant"),
                ((2, 3), (1, 2), (2, 1), [(1, 0), (1, 1)], "replicate")]


@pytest.mark.parametrize("size,stride,dil,pads,border", SAMPLE_CASES)
def test_sample(tmp_path: Path, size: tuple[int, int], stride: tuple[int, int], dil: tuple[int, int],
                pads: list[tuple[int, int]], border: str) -> None:
    """output[i] = input~[i·s + index[i]·d − p] with index the row-major window offset."""
    x = rand(1, 2, 7, 6)
    ext = np_border(x, pads, border) if border != "constant" else pad_nchw(f(x), pads, 0.0)
    oh = (ext.shape[2] - (size[0] - 1) * dil[0] - 1) // stride[0] + 1
    ow = (ext.shape[3] - (size[1] - 1) * dil[1] - 1) // stride[1] + 1
    index = np.asarray(RNG.integers(0, size[0] * size[1], size=(1, 2, oh, ow)), np.int32)
    want = np.zeros((1, 2, oh, ow))
    for n, c, i, j in np.ndindex(*want.shape):
        ky, kx = divmod(int(index[n, c, i, j]), size[1])
        want[n, c, i, j] = ext[n, c, i * stride[0] + ky * dil[0], j * stride[1] + kx * dil[1]]
    full = [(0, 0), (0, 0)] + pads
    run_case(tmp_path, "sample", f"out = sample(x, i, size = [1, 1, {size[0]}, {size[1]}], border = '{border}', "
             f"padding = {full}, stride = [1, 1, {stride[0]}, {stride[1]}], dilation = [1, 1, {dil[0]}, {dil[1]}]);",
             {"x": x, "i": index}, ["out"], [want])


def np_unwindow(x: np.ndarray, take: Callable[[int, int, int, int, int], bool], size: Sequence[int],
                stride: Sequence[int], dil: Sequence[int], pads: Sequence[tuple[int, int]],
                out_hw: Sequence[int]) -> np.ndarray:
    """Spec 4.3 desample/debox: output[o] = Σ_j input[(o + p − j·d) / s] over the j where the division is exact,
    the quotient inside the input and ``take(n, c, qy, qx, j)`` (desample: index[q] = j; debox: always)."""
    n_, c_, h, w = x.shape
    out = np.zeros((n_, c_, *out_hw))
    for n, c, oy, ox in np.ndindex(*out.shape):
        for ky in range(size[0]):
            for kx in range(size[1]):
                ty, tx = oy + pads[0][0] - ky * dil[0], ox + pads[1][0] - kx * dil[1]
                if ty % stride[0] or tx % stride[1]:
                    continue
                qy, qx = ty // stride[0], tx // stride[1]
                if 0 <= qy < h and 0 <= qx < w and take(n, c, qy, qx, ky * size[1] + kx):
                    out[n, c, oy, ox] += x[n, c, qy, qx]
    return out


@pytest.mark.parametrize("size,stride,dil,pads,out_hw", [
    ((2, 2), (2, 2), (1, 1), [(0, 0), (0, 0)], (8, 6)), ((3, 2), (2, 1), (1, 1), [(1, 1), (0, 1)], (7, 4)),
    ((2, 3), (1, 2), (2, 1), [(1, 0), (1, 1)], (5, 7))])
def test_desample_and_debox(tmp_path: Path, size: tuple[int, int], stride: tuple[int, int], dil: tuple[int, int],
                            pads: list[tuple[int, int]], out_hw: tuple[int, int]) -> None:
    ih = (out_hw[0] + sum(pads[0]) - (size[0] - 1) * dil[0] - 1) // stride[0] + 1
    iw = (out_hw[1] + sum(pads[1]) - (size[1] - 1) * dil[1] - 1) // stride[1] + 1
    x = rand(1, 2, ih, iw)
    index = np.asarray(RNG.integers(0, size[0] * size[1], size=x.shape), np.int32)
    want_de = np_unwindow(f(x), lambda n, c, qy, qx, j: int(index[n, c, qy, qx]) == j, size, stride, dil, pads,
                          out_hw)
    want_box = np_unwindow(f(x), lambda *_: True, size, stride, dil, pads, out_hw) / (size[0] * size[1])
    full = [(0, 0), (0, 0)] + pads
    common = (f"size = [1, 1, {size[0]}, {size[1]}], padding = {full}, stride = [1, 1, {stride[0]}, {stride[1]}], "
              f"dilation = [1, 1, {dil[0]}, {dil[1]}], output_shape = [1, 2, {out_hw[0]}, {out_hw[1]}]")
    run_case(tmp_path, "desample", f"d = desample(x, i, {common}); e = debox(x, {common}, normalize = true);",
             {"x": x, "i": index}, ["d", "e"], [want_de, want_box])


def test_argmax_pool_sample_desample_roundtrip(tmp_path: Path) -> None:
    """The unpooling pattern: sample(x, argmax_pool(x)) is max_pool; desample puts each maximum back in place."""
    x = POOL_X[:, :, :6, :6]
    want_max = np_pool(x, (1, 1, 2, 2), (1, 1, 2, 2), [(0, 0)] * 4, "max", "constant")
    win = f(x).reshape(1, 3, 3, 2, 3, 2)
    mask = win == win.max(axis=(3, 5), keepdims=True)
    want_un = np.where(mask, win, 0.0).reshape(1, 3, 6, 6)
    attrs = "size = [1, 1, 2, 2], stride = [1, 1, 2, 2], padding = [(0, 0), (0, 0), (0, 0), (0, 0)]"
    run_case(tmp_path, "unpool", f"i = argmax_pool(x, {attrs}); m = sample(x, i, {attrs}); "
             f"u = desample(m, i, {attrs}, output_shape = [1, 3, 6, 6]);", {"x": x}, ["m", "u"], [want_max, want_un])


def test_resampling_1d(tmp_path: Path) -> None:
    """The resampling operations on rank-3 (NCW) tensors: nearest repeats, every f-th, block means, and the
    'symmetric' linear interpolation (sample i at (i + ½)/f − ½, edges replicated)."""
    x = rand(2, 3, 6)
    pos = (np.arange(12) + 0.5) / 2 - 0.5
    lo = np.floor(pos).astype(int)
    t = pos - lo
    lin = f(x)[:, :, np.clip(lo, 0, 5)] * (1 - t) + f(x)[:, :, np.clip(lo + 1, 0, 5)] * t
    run_case(tmp_path, "resample1d",
             "u = nearest_upsample(x, factor = [2]); d = nearest_downsample(x, factor = [3]);"
             "a = area_downsample(x, factor = [2]); m = multilinear_upsample(x, factor = [2]);",
             {"x": x}, ["u", "d", "a", "m"],
             [np.repeat(f(x), 2, axis=2), f(x)[:, :, ::3], f(x).reshape(2, 3, 3, 2).mean(axis=3), lin])


@pytest.mark.parametrize("body,shape,filt,reason", [
    ("out = max_pool(x, size = [1, 1, 2, 2, 2]);", (1, 2, 4, 4, 4), None, "rank-5"),
    ("out = deconv(x, w, 0.0, groups = 2);", (1, 2, 4, 4, 4), (2, 3, 2, 2, 2), "3-D deconv with 2 groups"),
    ("out = conv(x, w, 0.0, groups = 2);", (1, 2, 4, 4, 4), (2, 1, 2, 2, 2), "3-D conv with 2 groups"),
    ("out = deconv(x, w, 0.0, border = 'reflect');", (1, 2, 4, 4), (2, 3, 2, 2), "deconv border 'reflect'"),
    ("out = desample(x, i, size = [1, 1, 2, 2], border = 'replicate');", (1, 2, 3, 3), None, "'constant' only")])
def test_window_refusals(tmp_path: Path, body: str, shape: tuple[int, ...], filt: tuple[int, ...] | None,
                         reason: str) -> None:
    """What stays outside: 3-D pools, grouped 3-D conv and deconv, deconv with a padded border other than
    'constant', desample with a border other than the spec's."""
    from tf2tosa.errors import ConversionError

    inputs = {"x": (shape, "scalar")}
    if "desample" in body:
        inputs["i"] = (shape, "integer")
    folder = write_graph(tmp_path / "refused.nnef", body, inputs, ["out"],
                         {"w": rand(*filt)} if filt else None)
    with pytest.raises(ConversionError, match=reason):
        tf2tosa.convert(folder)


def test_audio_style_1d_chain(tmp_path: Path) -> None:
    """A rank-3 chain as in audio models: conv (stride 2) → relu → max_pool → deconv (stride 2) + a skip."""
    x = rand(1, 4, 16)
    w1, b1 = rand(8, 4, 3), rand(1, 8)
    w2 = rand(8, 4, 2)
    pad = auto_pads((16,), (3,), (2,), (1,))[0]
    c = np.maximum(np_conv1d(x, w1, b1, 2, pad, 1), 0.0)
    p = np_pool(c, (1, 1, 2), (1, 1, 2), [(0, 0)] * 3, "max", "constant")
    d = np_deconv1d(p, w2, 2, 8, 0)
    want = d + f(x)[:, :, ::2]
    m = run_case(tmp_path, "audio1d", "c = relu(conv(x, w1, b1, stride = [2])); "
             "p = max_pool(c, size = [1, 1, 2], stride = [1, 1, 2], padding = [(0, 0), (0, 0), (0, 0)]); "
             "d = deconv(p, w2, 0.0, stride = [2], padding = [(0, 0)], output_shape = [1, 4, 8]); "
             "out = add(d, nearest_downsample(x, factor = [2]));", {"x": x}, ["out"], [want],
             variables={"w1": w1, "b1": b1, "w2": w2})
    # the layout pass runs the rank-3 windows in NWC: the NCW↔NWC pairs between them cancel (8 TRANSPOSEs without)
    assert m.graph.record.layout == {"transposes_before": 8, "transposes_after": 3}
    assert sum(op.name == "tosa.TRANSPOSE" for op in m.graph.ops.values()) == 3


def np_deconv3d(x: np.ndarray, w: np.ndarray, bias: np.ndarray, stride: Sequence[int], out_dhw: Sequence[int],
                before: Sequence[int]) -> np.ndarray:
    """Spec 4.3 deconv, three spatial dimensions: input[n, c, i, j, k] · filter[c, o, a, b, e] adds to
    output[n, o, i·s₀ + a − p₀, j·s₁ + b − p₁, k·s₂ + e − p₂] (+ bias[o])."""
    x, w = x.astype(F64), w.astype(F64)
    _, o, *ks = w.shape
    full = np.zeros((x.shape[0], o, *[(x.shape[2 + i] - 1) * stride[i] + ks[i] for i in range(3)]))
    for i, j, k in np.ndindex(*x.shape[2:]):
        full[:, :, i * stride[0]:i * stride[0] + ks[0], j * stride[1]:j * stride[1] + ks[1],
             k * stride[2]:k * stride[2] + ks[2]] += np.einsum("nc,coabe->noabe", x[:, :, i, j, k], w)
    out = full[:, :, before[0]:before[0] + out_dhw[0], before[1]:before[1] + out_dhw[1],
               before[2]:before[2] + out_dhw[2]]
    return out + f(bias).reshape(1, -1, 1, 1, 1)


@pytest.mark.parametrize("padding", ["[]", "[(0, 0), (0, 0), (0, 0)]"])
def test_deconv_3d(tmp_path: Path, padding: str) -> None:
    x = rand(1, 3, 2, 3, 2)
    w = rand(3, 4, 2, 3, 3)
    bias = rand(1, 4)
    stride = (2, 1, 2)
    if padding == "[]":  # automatic: total = max(0, (in − 1)·s + k − out), half before
        out = (4, 3, 4)
        before = [max(0, (n - 1) * s + k - o) // 2 for n, s, k, o in zip((2, 3, 2), stride, (2, 3, 3), out)]
    else:
        out, before = (4, 5, 5), [0, 0, 0]
    want = np_deconv3d(x, w, bias, stride, out, before)
    run_case(tmp_path, "deconv3d", f"out = deconv(x, w, b, stride = {list(stride)}, padding = {padding}, "
             f"output_shape = [1, 4, {out[0]}, {out[1]}, {out[2]}]);", {"x": x}, ["out"], [want],
             variables={"w": w, "b": bias})


def test_unpool_1d(tmp_path: Path) -> None:
    """argmax_pool → sample → desample, and debox, on rank-3 tensors (the 1-D forms of spec 4.3.2-4.3.3)."""
    x = X1[:, :, :10]
    win = f(x).reshape(2, 4, 5, 2)
    want_max = win.max(axis=3)
    first = np.argmax(win, axis=3)
    want_un = np.zeros_like(win)
    np.put_along_axis(want_un, first[..., None], want_max[..., None], axis=3)
    want_box = np.repeat(f(x)[:, :, ::2], 2, axis=2)  # debox of stride 2, size 2, no padding: each value twice
    attrs = "size = [1, 1, 2], stride = [1, 1, 2], padding = [(0, 0), (0, 0), (0, 0)]"
    run_case(tmp_path, "unpool1d", f"i = argmax_pool(x, {attrs}); m = sample(x, i, {attrs}); "
             f"u = desample(m, i, {attrs}, output_shape = [2, 4, 10]); "
             f"e = debox(nearest_downsample(x, factor = [2]), {attrs}, output_shape = [2, 4, 10]);",
             {"x": x}, ["m", "u", "e"], [want_max, want_un.reshape(2, 4, 10), want_box])
