"""Integers ``a`` whose double product ``fl64(a·S)`` lands exactly on a half-integer that the exact product stays
below — the inputs where ``round((double)acc · s)`` and exact rounding differ (2D lattice reduction + Babai)."""

from __future__ import annotations

import math
from fractions import Fraction


def find_near_half(S: float, ymin: float, ymax: float, ey: int) -> list[int]:
    """a with ymin <= a*S < ymax, a*S just below a half-integer by at most ulp/2 (fl64(a*S) = n + 1/2);
    ``ey`` = floor(log2 y) over the range."""
    fr = Fraction(S)
    M, K = fr.numerator, fr.denominator.bit_length() - 1
    A0, A1 = math.ceil(ymin / S), math.floor(ymax / S)
    W = 1 << max(K + ey - 53, 0)
    T = 1 << (K - 1)
    mod = 1 << K
    scale = Fraction(max(A1 - A0, 1), W)
    # lattice points (a, v) with v ≡ a*M (mod 2^K): basis (1, M), (0, 2^K); metric: a, v*scale
    def norm(v: tuple[int, int]) -> Fraction:
        return v[0] * v[0] + (v[1] * scale) ** 2

    b1, b2 = (1, M % mod), (0, mod)
    while True:  # Gauss reduction
        if norm(b1) > norm(b2):
            b1, b2 = b2, b1
        num = b1[0] * b2[0] + b1[1] * b2[1] * scale * scale
        den = norm(b1)
        m = round(num / den)
        if m == 0:
            break
        b2 = (b2[0] - m * b1[0], b2[1] - m * b1[1])
        if norm(b2) >= norm(b1) and round((b1[0] * b2[0] + b1[1] * b2[1] * scale * scale) / norm(b1)) == 0:
            break
    tgt = (Fraction(A0 + A1, 2), Fraction(T) - Fraction(W, 2))
    # solve tgt = x*b1 + y*b2 over rationals
    det = b1[0] * b2[1] - b1[1] * b2[0]
    x = (tgt[0] * b2[1] - tgt[1] * b2[0]) / det
    y = (b1[0] * tgt[1] - b1[1] * tgt[0]) / det
    out: list[int] = []
    for dx in range(-4, 5):
        for dy in range(-4, 5):
            X, Y = math.floor(x) + dx, math.floor(y) + dy
            a = X * b1[0] + Y * b2[0]
            if not A0 <= a <= A1:
                continue
            r = (a * M) % mod
            if T - W <= r < T:
                xx = a * S
                n = math.floor(xx)
                if xx - n == 0.5 and Fraction(a) * fr < n + Fraction(1, 2):
                    out.append(a)
    return sorted(set(out))

