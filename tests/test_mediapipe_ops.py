"""MediaPipe's landmark custom ops (face / pose landmark models): ``Landmarks2TransformMatrix``,
``TransformLandmarks`` and ``TransformTensorBilinear``, lowered to TOSA as ordinary math (tfl_custom.py).

LiteRT has no kernels for them, so the oracle is a numpy implementation written here from MediaPipe's published
kernel definitions (mediapipe/util/tflite/operations/*.cc, the version the MediaPipe op resolver registers: 2, and
version 1 where lowered): matrices are built as the products the kernels multiply, not in the closed form the
lowering uses.  Float results must be within ``RTOL`` × max |reference|; every .tosa validates in tosa-opt and the Arm
reference model agrees with the executor.

The models are written as flatbuffers (tests.modelgen_more.tflite_model) with FlexBuffer custom options, the format
the kernels parse.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from flatbuffers import flexbuffers

import tf2tosa
from tests.modelgen_more import CUSTOM, Op, T, tflite_model

RTOL = 1e-5
f32 = np.float32


# ------------------------------------------------------------------------------------- custom options
def flex(**fields: Any) -> bytes:
    """A FlexBuffer map: ints, floats, int lists (typed vectors) and strings."""
    b = flexbuffers.Builder()
    with b.Map():
        for k, v in fields.items():
            if isinstance(v, (list, tuple)):
                b.Key(k)
                b.TypedVectorFromElements([int(i) for i in v])
            elif isinstance(v, float):
                b.Float(k, v)
            elif isinstance(v, str):
                b.String(k, v)
            else:
                b.Int(k, int(v))
    return bytes(b.Finish())


L2TM_OPTS: dict[str, Any] = {"subset_idxs": [0, 5, 9, 13, 20, 27, 31, 38, 2], "left_rotation_idx": 3,
                             "right_rotation_idx": 17, "target_rotation_radians": 0.25, "output_height": 8,
                             "output_width": 12, "scale_x": 1.5, "scale_y": 1.25}


# ------------------------------------------------------------------------ numpy, from the published kernels
def _mat3(*v: float) -> np.ndarray:
    return np.array(v, f32).reshape(3, 3)


def _mat4(*v: float) -> np.ndarray:
    return np.array(v, f32).reshape(4, 4)


def ref_landmarks_to_transform_matrix(landmarks: np.ndarray, o: dict[str, Any]) -> np.ndarray:
    """landmarks_to_transform_matrix.cc, v2: EstimateRotationRadians, EstimateCenterAndSize, then
    t = I · shift(crop) · rotation(-r) · scale · shift(-output/2), all in float."""
    pts = landmarks.reshape(-1, 3).astype(f32)
    lx, ly = pts[o["left_rotation_idx"], :2]
    rx, ry = pts[o["right_rotation_idx"], :2]
    r = f32(o["target_rotation_radians"]) - f32(np.arctan2(f32(ry - ly), f32(rx - lx)))
    idx = list(o["subset_idxs"])
    if len(idx) % 2:
        idx.append(idx[-1])
    lms = [np.array([pts[i, 0], pts[i, 1], 1.0], f32) for i in idx]  # z set to 1
    rot = _mat3(np.cos(r), -np.sin(r), 0, np.sin(r), np.cos(r), 0, 0, 0, 1)
    rot_inv = _mat3(np.cos(-r), -np.sin(-r), 0, np.sin(-r), np.cos(-r), 0, 0, 0, 1)
    lms = [rot @ p for p in lms]
    hi = np.max(np.stack(lms), axis=0)
    lo = np.min(np.stack(lms), axis=0)
    width, height = f32(hi[0] - lo[0]), f32(hi[1] - lo[1])
    centre = rot_inv @ np.array([(lo[0] + hi[0]) / f32(2), (lo[1] + hi[1]) / f32(2), 1.0], f32)
    t = np.eye(4, dtype=f32)
    t = t @ _mat4(1, 0, 0, centre[0], 0, 1, 0, centre[1], 0, 0, 1, 0, 0, 0, 0, 1)
    rr = -r
    t = t @ _mat4(np.cos(rr), -np.sin(rr), 0, 0, np.sin(rr), np.cos(rr), 0, 0, 0, 0, 1, 0, 0, 0, 0, 1)
    sx = f32(o["scale_x"]) * width / f32(o["output_width"])
    sy = f32(o["scale_y"]) * height / f32(o["output_height"])
    t = t @ _mat4(sx, 0, 0, 0, 0, sy, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1)
    t = t @ _mat4(1, 0, 0, -o["output_width"] / 2.0, 0, 1, 0, -o["output_height"] / 2.0, 0, 0, 1, 0, 0, 0, 0, 1)
    return t.reshape(1, 4, 4)


def ref_transform_landmarks(landmarks: np.ndarray, matrix: np.ndarray, dims: int, scale: float = 1.0) -> np.ndarray:
    """transform_landmarks.cc: (x, y, 0, 1) dotted with the first two matrix rows (column 3 times ``scale``)."""
    m = matrix.reshape(-1)[:16].reshape(4, 4).astype(f32).copy()
    m[:2, 3] *= f32(scale)
    pts = landmarks.reshape(-1, dims).astype(f32)
    out = pts.copy()
    for i, p in enumerate(pts):
        lv = np.array([p[0], p[1], 0.0, 1.0], f32)
        out[i, 0] = np.dot(m[0], lv)
        out[i, 1] = np.dot(m[1], lv)
    return out.reshape(landmarks.shape)


def ref_transform_tensor_bilinear(x: np.ndarray, matrix: np.ndarray, oh: int, ow: int, align: bool) -> np.ndarray:
    """transform_tensor_bilinear.cc: sample the input at the transformed pixel (v2: align-corners correction of
    the translation), reads outside the image are 0, points outside [0, W-1] x [0, H-1] give 0."""
    _, h, w, c = x.shape
    m = matrix.reshape(-1).astype(np.float64)
    xt, yt = m[0:4].copy(), m[4:8].copy()
    if align:
        xt[3] += xt[0] * 0.5 + xt[1] * 0.5 - 0.5
        yt[3] += yt[0] * 0.5 + yt[1] * 0.5 - 0.5
    xt, yt = xt.astype(f32), yt.astype(f32)
    out = np.zeros((1, oh, ow, c), f32)

    def read(yy: int, xx: int) -> np.ndarray:
        return np.zeros(c, f32) if yy < 0 or xx < 0 or yy >= h or xx >= w else x[0, yy, xx]

    for oy in range(oh):
        for ox in range(ow):
            coord = np.array([ox, oy, 0.0, 1.0], f32)
            tx, ty = f32(np.dot(xt, coord)), f32(np.dot(yt, coord))
            if tx < 0 or tx > w - 1 or ty < 0 or ty > h - 1:
                continue
            fx, fy = int(np.floor(tx)), int(np.floor(ty))
            rc, lc = tx - f32(fx), ty - f32(fy)
            upper = (1.0 - rc) * read(fy, fx) + rc * read(fy, fx + 1)
            lower = (1.0 - rc) * read(fy + 1, fx) + rc * read(fy + 1, fx + 1)
            out[0, oy, ox] = lc * lower + (1.0 - lc) * upper
    return out


# ------------------------------------------------------------------------------------------------- models
def l2tm_model(n: int = 40, **over: Any) -> bytes:
    opts = {**L2TM_OPTS, **over}
    return tflite_model([T("landmarks", (1, n, 3)), T("matrix", (1, 4, 4))],
                        [Op(CUSTOM, [0], [1], "Landmarks2TransformMatrix", flex(**opts), version=2)], [0], [1])


def transform_landmarks_model(shape: tuple[int, ...], version: int = 2, **opts: Any) -> bytes:
    return tflite_model([T("landmarks", shape), T("matrix", (1, 4, 4)), T("out", shape)],
                        [Op(CUSTOM, [0, 1], [2], "TransformLandmarks", flex(**opts), version=version)], [0, 1], [2])


def ttb_model(h: int, w: int, c: int, oh: int, ow: int, code: str = "TransformTensorBilinear",
              version: int = 2) -> bytes:
    opts = flex(output_height=oh, output_width=ow) if code == "TransformTensorBilinear" else \
        flex(mode="bilinear", output_size=[oh, ow])
    return tflite_model([T("features", (1, h, w, c)), T("matrix", (1, 4, 4)), T("out", (1, oh, ow, c))],
                        [Op(CUSTOM, [0, 1], [2], code, opts, version=version)], [0, 1], [2])


def pipeline_model() -> bytes:
    """The face/pose landmark pattern: Landmarks2TransformMatrix → TransformTensorBilinear crops a feature map,
    TransformLandmarks maps crop-local landmarks back with the same matrix."""
    opts = {**L2TM_OPTS, "output_height": 8, "output_width": 8}
    ts = [T("landmarks", (1, 40, 3)), T("features", (1, 16, 16, 4)), T("local", (1, 10, 3)),
          T("matrix", (1, 4, 4)), T("crop", (1, 8, 8, 4)), T("global", (1, 10, 3))]
    ops = [Op(CUSTOM, [0], [3], "Landmarks2TransformMatrix", flex(**opts), version=2),
           Op(CUSTOM, [1, 3], [4], "TransformTensorBilinear", flex(output_height=8, output_width=8), version=2),
           Op(CUSTOM, [2, 3], [5], "TransformLandmarks", b"", version=2)]
    return tflite_model(ts, ops, [0, 1, 2], [4, 5, 3])


def _affine(rng: np.random.Generator, shift: tuple[float, float]) -> np.ndarray:
    a = rng.uniform(-0.6, 0.6)
    s = rng.uniform(0.7, 1.6, 2)
    m = np.eye(4, dtype=f32)
    m[0, :2] = s[0] * np.cos(a), -s[1] * np.sin(a)
    m[1, :2] = s[0] * np.sin(a), s[1] * np.cos(a)
    m[0, 3], m[1, 3] = shift
    m[2, 2] = rng.uniform(0.5, 2)  # not read by the kernels
    m[0, 2], m[1, 2] = rng.uniform(-3, 3, 2)  # multiplied by 0 in the kernels
    return m.reshape(1, 4, 4)


def _landmarks(rng: np.random.Generator, n: int, lo: float = 2.0, hi: float = 14.0) -> np.ndarray:
    return rng.uniform(lo, hi, (1, n, 3)).astype(f32)


def _check(ours: np.ndarray, want: np.ndarray) -> float:
    scale = float(np.abs(want).max())
    err = float(np.abs(ours.astype(np.float64) - want.astype(np.float64)).max())
    assert err <= RTOL * scale, f"max |ours - reference| = {err:.3g} > {RTOL} x {scale:.3g}"
    return err / scale


def _validate(model: tf2tosa.TosaModel, feeds: dict[str, np.ndarray]) -> None:
    from tf2tosa.executor import run
    from tf2tosa.verify import tosa_tools

    if not tosa_tools.available():
        return
    data = model.to_bytes()
    ok, msg = tosa_tools.validate(data, model.profiles, model.extensions)
    assert ok, msg
    arm = tosa_tools.run_reference(data, feeds, precise=True)
    ours = run(model.graph, feeds, precise=True)
    for name, a in arm.items():
        np.testing.assert_allclose(ours[name], a, rtol=0, atol=1e-6 * max(1.0, float(np.abs(a).max())))


def _io(model: tf2tosa.TosaModel) -> tuple[list[str], list[str]]:
    return model.input_names, model.output_names


# -------------------------------------------------------------------------------------------------- tests
def test_landmarks_to_transform_matrix() -> None:
    model = tf2tosa.convert(l2tm_model())
    ops = model.graph.op_counts()
    assert "tosa.CUSTOM" not in ops and {"tosa.COS", "tosa.SIN", "tosa.GATHER"} <= set(ops)
    (name,), (out,) = _io(model)
    rng = np.random.default_rng(0)
    worst = 0.0
    for k in range(6):
        lm = _landmarks(rng, 40, -50.0 if k % 2 else 2.0, 300.0 if k % 2 else 14.0)
        if k == 5:  # the rotation landmarks straight left of each other: atan2 at ±π
            lm[0, 17, :2] = lm[0, 3, 0] - 7.0, lm[0, 3, 1]
        got = model.run({name: lm})[out]
        worst = max(worst, _check(got, ref_landmarks_to_transform_matrix(lm, L2TM_OPTS)))
    _validate(model, {name: lm})


def test_landmarks_to_transform_matrix_version_1_is_refused_with_reason() -> None:
    data = tflite_model([T("landmarks", (1, 40, 3)), T("matrix", (1, 4, 4))],
                        [Op(CUSTOM, [0], [1], "Landmarks2TransformMatrix", flex(**L2TM_OPTS), version=1)], [0], [1])
    with pytest.raises(tf2tosa.UnsupportedOpsError, match="Landmarks2TransformMatrix version 1"):
        tf2tosa.convert(data)


@pytest.mark.parametrize("shape,version,opts", [((1, 33, 3), 2, {}), ((1, 21, 2), 2, {}),
                                                 ((1, 4, 5, 6), 1, {"dimensions": 3, "scale": 2.5}),
                                                 ((1, 3, 2, 4), 1, {"dimensions": 2, "scale": 0.75})], ids=str)
def test_transform_landmarks(shape: tuple[int, ...], version: int, opts: dict[str, Any]) -> None:
    model = tf2tosa.convert(transform_landmarks_model(shape, version, **opts))
    assert "tosa.CUSTOM" not in model.graph.op_counts()
    (lm_name, m_name), (out,) = _io(model)
    rng = np.random.default_rng(1)
    dims = opts.get("dimensions", shape[-1])
    for _ in range(3):
        lm = rng.uniform(-5, 20, shape).astype(f32)
        m = _affine(rng, tuple(rng.uniform(-10, 10, 2)))
        got = model.run({lm_name: lm, m_name: m})[out]
        want = ref_transform_landmarks(lm, m, dims, opts.get("scale", 1.0))
        _check(got, want)
        if dims == 3:  # z passes through unchanged
            np.testing.assert_array_equal(got.reshape(-1, 3)[:, 2], lm.reshape(-1, 3)[:, 2])
    _validate(model, {lm_name: lm, m_name: m})


@pytest.mark.parametrize("code,version", [("TransformTensorBilinear", 2), ("TransformTensor", 1)])
def test_transform_tensor_bilinear(code: str, version: int) -> None:
    h, w, c, oh, ow = 12, 10, 3, 8, 7
    model = tf2tosa.convert(ttb_model(h, w, c, oh, ow, code, version))
    assert "tosa.CUSTOM" not in model.graph.op_counts()
    (x_name, m_name), (out,) = _io(model)
    rng = np.random.default_rng(2)
    inside = outside = 0
    for k in range(4):
        x = rng.standard_normal((1, h, w, c)).astype(f32)
        m = _affine(rng, (rng.uniform(0, 4), rng.uniform(0, 5)) if k else (1.0, 2.0))
        got = model.run({x_name: x, m_name: m})[out]
        want = ref_transform_tensor_bilinear(x, m, oh, ow, align=version == 2)
        _check(got, want)
        zero = np.all(want == 0, axis=-1)
        inside, outside = inside + int((~zero).sum()), outside + int(zero.sum())
        np.testing.assert_array_equal(got[zero], 0)
    assert inside > 20 and outside > 5, (inside, outside)  # both branches of the kernel were exercised
    _validate(model, {x_name: x, m_name: m})


def test_transform_tensor_bilinear_identity_is_exact() -> None:
    """v2 with the identity matrix: the align-corners correction cancels, pixels are copied exactly."""
    model = tf2tosa.convert(ttb_model(6, 5, 2, 6, 5))
    x = np.random.default_rng(3).standard_normal((1, 6, 5, 2)).astype(f32)
    got = model.run({model.input_names[0]: x, model.input_names[1]: np.eye(4, dtype=f32).reshape(1, 4, 4)})
    np.testing.assert_array_equal(got[model.output_names[0]], x)


def test_face_landmark_pipeline() -> None:
    """The three ops chained as in the real models, against the numpy chain."""
    model = tf2tosa.convert(pipeline_model())
    ops = model.graph.op_counts()
    assert "tosa.CUSTOM" not in ops
    names, outs = _io(model)
    rng = np.random.default_rng(4)
    for _ in range(3):
        feeds = {names[0]: _landmarks(rng, 40), names[1]: rng.standard_normal((1, 16, 16, 4)).astype(f32),
                 names[2]: rng.uniform(0, 8, (1, 10, 3)).astype(f32)}
        got = model.run(feeds)
        opts = {**L2TM_OPTS, "output_height": 8, "output_width": 8}
        mat = ref_landmarks_to_transform_matrix(feeds[names[0]], opts)
        _check(got[outs[2]], mat)
        _check(got[outs[0]], ref_transform_tensor_bilinear(feeds[names[1]], mat, 8, 8, align=True))
        _check(got[outs[1]], ref_transform_landmarks(feeds[names[2]], mat, 3))
    _validate(model, feeds)
