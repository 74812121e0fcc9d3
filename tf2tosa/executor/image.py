"""§2.12 RESIZE (spec 2.12.1 RESIZE), vectorised over output rows/columns."""

from __future__ import annotations

import numpy as np

from ..ir.graph import Operation
from ..ir.types import DType
from .registry import bind, error_if, fdt, in_dtype, int_list, kernel, out_dtype, to_out


def _axis_params(o: np.ndarray, n: int, d: int, off: int, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    y = o * d + off
    iy = y // n  # idiv_floor
    ry = y - iy * n
    iy0 = np.maximum(iy, 0)
    iy1 = np.minimum(iy + 1, size - 1)
    return iy0, iy1, ry


@kernel("RESIZE")
def resize(op: Operation, ins: list[np.ndarray]) -> list[np.ndarray]:
    args = bind(op, ins)
    x = args.input
    yn, yd, xn, xd = int_list(args.scale)
    oy_off, ox_off = int_list(args.offset)
    by, bx = int_list(args.border)
    mode = str(op.attrs.get("mode", "BILINEAR")).upper()
    n_, ih, iw, c = x.shape
    error_if(min(yn, yd, xn, xd) <= 0, op, "scale values must be > 0")
    error_if(yn > 2048 or xn > 2048, op, "scale_n > 2048")
    error_if(yd >= 16 * yn or xd >= 16 * xn, op, "downscale must be > 1/16")
    error_if(oy_off < -yn or oy_off >= 16 * yn or ox_off < -xn or ox_off >= 16 * xn, op, "offset out of range")
    error_if(by < -16 * yn or by >= yn or bx < -16 * xn or bx >= xn, op, "border out of range")
    num_y = (ih - 1) * yn - oy_off + by
    num_x = (iw - 1) * xn - ox_off + bx
    error_if(num_y % yd != 0 or num_x % xd != 0, op, "output size is not exact (idiv_check)")
    oh, ow = num_y // yd + 1, num_x // xd + 1
    error_if(max(oh, ow, ih, iw) >= 16384, op, "image size >= 16384")
    error_if(oh < 1 or ow < 1, op, "empty output")
    iy0, iy1, ry = _axis_params(np.arange(oh, dtype=np.int64), yn, yd, oy_off, ih)
    ix0, ix1, rx = _axis_params(np.arange(ow, dtype=np.int64), xn, xd, ox_off, iw)
    if mode in ("NEAREST_NEIGHBOR", "NEAREST"):
        iy = np.where(2 * ry >= yn, iy1, iy0)
        ix = np.where(2 * rx >= xn, ix1, ix0)
        return [to_out(x[:, iy][:, :, ix], op)]
    error_if(mode != "BILINEAR", op, f"unknown resize mode {mode}")
    if in_dtype(op).is_float:
        ft = fdt()
        dy = (ry.astype(ft) / ft(yn))[None, :, None, None]
        dx = (rx.astype(ft) / ft(xn))[None, None, :, None]
        xf = x.astype(ft)
        uy, ux = ft(1) - dy, ft(1) - dx
        rows0, rows1 = xf[:, iy0], xf[:, iy1]
        acc = rows0[:, :, ix0] * uy * ux
        acc = acc + rows0[:, :, ix1] * uy * dx
        acc = acc + rows1[:, :, ix0] * dy * ux
        acc = acc + rows1[:, :, ix1] * dy * dx
        return [to_out(acc, op)]
    xi = x.astype(np.int64)
    dyi = ry[None, :, None, None]
    dxi = rx[None, None, :, None]
    r0, r1 = xi[:, iy0], xi[:, iy1]
    acc = (r0[:, :, ix0] * (yn - dyi) * (xn - dxi) + r0[:, :, ix1] * (yn - dyi) * dxi
           + r1[:, :, ix0] * dyi * (xn - dxi) + r1[:, :, ix1] * dyi * dxi)
    ot = out_dtype(op)
    if ot in (DType.INT8, DType.INT16):  # i8->i8 / i16->i16 bilinear is not a legal pair; keep static_cast
        acc = acc.astype(ot.np_dtype())
    return [to_out(acc, op)]
