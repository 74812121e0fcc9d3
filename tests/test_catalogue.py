"""The TOSA 1.0 catalogue against the spec seed, tosa.fbs, and hand-computed shapes.

The spec seed is re-parsed here independently (argument tables, type tables, Appendix B), and
every op of the catalogue is compared with it.  ``S<line>`` cites the seed.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tf2tosa.errors import InvalidGraphError
from tf2tosa.ir import DType, Graph, TensorType
from tf2tosa.tosa import optable, profiles, shapes, validation
from tf2tosa.tosa.optable import OPS, R
from tf2tosa.tosa.validation import infer_result_types, match_row, validate

# the spec seed lives in shared/, beside the repository (as in CI)
SPEC = Path(__file__).resolve().parents[2] / "shared" / "seeds" / "000_1233e33818c54f1a.txt"
needs_spec = pytest.mark.skipif(not SPEC.exists(), reason="spec seed not available")

F32, F16, BF16, I8, I16, I32, I48, BOOL, SHAPE = (DType.FP32, DType.FP16, DType.BF16, DType.INT8, DType.INT16,
                                                   DType.INT32, DType.INT48, DType.BOOL, DType.SHAPE)


def t(shape: tuple[int, ...] | list[int], dt: DType = F32) -> TensorType:
    return TensorType(tuple(shape), dt)


# ----------------------------------------------------------------------------- independent spec parse
def _spec_lines() -> list[str]:
    return SPEC.read_text().split("\n")


def _cells(lines: list[str], a: int, b: int) -> list[str]:
    """Blank-line separated cells of lines [a, b) (1-based)."""
    out, cur = [], []
    for line in lines[a - 1:b - 1]:
        if line.strip():
            cur.append(line.strip())
        elif cur:
            out.append(" ".join(cur))
            cur = []
    if cur:
        out.append(" ".join(cur))
    return out


@pytest.fixture(scope="module")
def spec_ops() -> dict[str, dict[str, Any]]:
    lines = _spec_lines()
    heads = [(i + 1, m.group(1), m.group(2)) for i, line in enumerate(lines)
             if (m := re.match(r"^(2\.\d+\.\d+)\. ([A-Z_0-9]+)$", line))]
    ops: dict[str, dict[str, Any]] = {}
    for k, (ln, sec, name) in enumerate(heads):
        end = heads[k + 1][0] if k + 1 < len(heads) else 10940
        cs = _cells(lines, ln, end)
        ia = cs.index("Argument Type Name Shape Rank Description")
        ie = next(i for i, c in enumerate(cs) if c in ("Compile Time Constant Status:", "Supported Data Types:"))
        kinds = [i for i in range(ia + 1, ie) if cs[i] in ("Input", "Output", "Attribute")] + [ie]
        args = [(cs[a], cs[a + 1], cs[a + 2]) for a, _b in zip(kinds, kinds[1:])]
        ictc = cs.index("Supported Data Types:")
        ctc = {c for c in cs[ie + 2:ictc] if not c.startswith(("PRO-", "EXT-"))} if ie != ictc else set()
        cols = cs[ictc + 1].split()[2:]
        iof = cs.index("Operation Function:")
        rows = []
        j = ictc + 2
        while j < iof:
            rows.append((cs[j], dict(zip(cols, cs[j + 2:j + 2 + len(cols)]))))
            j += 2 + len(cols)
        ops[name] = {"section": sec, "line": ln, "args": args, "ctc": ctc, "rows": rows}
    return ops


#: documented deviations of the catalogue from the seed's text (errata, IR conventions)
_ARG_TYPE_ERRATA = {("VARIABLE_WRITE", "input1"): "var_t", ("VARIABLE_READ", "output1"): "var_t",
                    ("COND_IF", "condition"): "cond_t"}


@needs_spec
def test_exactly_75_ops_matching_spec_headings(spec_ops: dict[str, Any]) -> None:
    assert len(OPS) == 75
    assert list(OPS) == list(spec_ops)  # same names, same (spec) order
    for name, op in OPS.items():
        assert op.spec_line == spec_ops[name]["line"]
        assert op.section == spec_ops[name]["section"]
        assert _spec_lines()[op.spec_line - 1] == f"{op.section}. {name}"


def test_all_ops_in_tosa_fbs_enum() -> None:
    from tf2tosa.verify import tosa_tools

    fbs = tosa_tools.schema_path()
    if fbs is None:
        pytest.skip("tosa.fbs not available: the tosa-tools environment is not installed")
    text = fbs.read_text()
    body = re.search(r"enum Op\s*:\s*uint32\s*\{(.*?)\}", text, re.S)
    assert body is not None
    names = {re.sub(r"=.*", "", s).strip() for s in body.group(1).split(",")}
    missing = [n for n in OPS if n not in names]
    assert missing == []


@needs_spec
def test_operands_attrs_and_ctc_match_spec(spec_ops: dict[str, Any]) -> None:
    for name, op in OPS.items():
        s = spec_ops[name]
        ins = [a[2] for a in s["args"] if a[0] == "Input"]
        outs = [a[2] for a in s["args"] if a[0] == "Output"]
        attrs = [a[2] for a in s["args"] if a[0] == "Attribute"]
        assert [a.name for a in op.inputs] == ins, name
        assert [a.name for a in op.outputs] == outs, name
        if name == "VARIABLE":  # uid -> name (IR convention, as tosa.fbs)
            attrs = ["name" if a == "uid" else a for a in attrs]
        if name in ("VARIABLE_WRITE", "VARIABLE_READ"):
            attrs = ["name"]
        assert [a.name for a in op.attrs] == attrs, name
        ctc = {a.name for a in op.inputs + op.outputs if a.ctc}
        assert ctc == s["ctc"], name
        for kind, typ, nm in s["args"]:
            if kind == "Attribute":
                continue
            arg = next(a for a in (op.inputs if kind == "Input" else op.outputs) if a.name == nm)
            if typ.startswith("shape_t"):
                assert arg.role == "shape" and arg.type_var == "shape_t", (name, nm)
            elif typ.startswith("tensor_list_t"):
                assert arg.role == "tensor_list", (name, nm)
            else:
                want = _ARG_TYPE_ERRATA.get((name, nm), re.sub(r"^T<(.*)>$", r"\1", typ))
                assert arg.type_var == want, (name, nm)


def _spec_row_types(types: dict[str, str]) -> dict[str, DType]:
    out = {}
    for k, v in types.items():
        if k == "TABLE_SIZE" or v == "-":
            continue
        v = v[:-2] if v.endswith("_t") else v
        out[k] = DType("shape" if v == "tensor_size" else v)
    return out


@needs_spec
def test_every_type_row_matches_spec(spec_ops: dict[str, Any]) -> None:
    total = 0
    for name, op in OPS.items():
        rows = spec_ops[name]["rows"]
        assert len(op.rows) == len(rows), name
        for mine, (prof, types) in zip(op.rows, rows):
            ref = R(prof)
            assert (mine.support, mine.also) == (ref.support, ref.also), (name, prof)
            assert mine.types == _spec_row_types(types), (name, types)
            total += 1
    assert total == sum(len(o["rows"]) for o in spec_ops.values())


@needs_spec
def test_profile_counts_match_appendix_b() -> None:
    """Appendix B (S12157-15104) lists each op mode per profile/extension; the counts must agree."""
    lines = _spec_lines()
    bounds = [(12161, 12949, "PRO-INT"), (12949, 13857, "PRO-FP")]
    heads = [(i + 1, m.group(1)) for i, line in enumerate(lines)
             if 13857 <= i + 1 < 15120 and (m := re.match(r"^6\.2\.\d+\. (EXT-[A-Z0-9]+) extension$", line))]
    bounds += [(a, (heads[k + 1][0] if k + 1 < len(heads) else 15105), e) for k, (a, e) in enumerate(heads)]
    appendix: Counter[tuple[str, str]] = Counter()
    for a, b, prof in bounds:
        cs = _cells(lines, a, b)
        for i in range(len(cs) - 2):
            if cs[i] in OPS and cs[i + 2] == "1.0":
                appendix[(cs[i], prof)] += 1
    mine: Counter[tuple[str, str]] = Counter()
    for name, op in OPS.items():
        for row in op.rows:
            reqs = row.requirements
            if any(r.startswith("EXT-") for r in reqs):  # "EXT-VARIABLE and PRO-FP" is listed under the extension
                reqs = tuple(r for r in reqs if r.startswith("EXT-"))
            for p in reqs:
                mine[(name, p)] += 1
    assert sum(appendix.values()) > 300
    assert appendix == mine


# -------------------------------------------------------------------------------------- spot checks
def test_spot_checks_read_in_spec() -> None:
    conv = optable.get("CONV2D")
    assert [a.name for a in conv.inputs] == ["input", "weight", "bias", "input_zp", "weight_zp"]  # S1396-1455
    assert [a.role for a in conv.inputs] == ["tensor", "tensor", "tensor", "zp", "zp"]
    assert conv.inputs[0].rank == 4 and conv.inputs[1].rank == 4 and conv.inputs[2].rank == 1
    assert optable.get("tosa.CONV2D") is conv
    table = optable.get("TABLE")
    r16 = [r for r in table.rows if r.types["in_t"] is I16]
    assert len(r16) == 1 and r16[0].support == ("EXT-INT16",) and r16[0].types["out_t"] is I32  # S5371-5381
    add_int = [r.types["in_out_t"] for r in optable.get("ADD").rows if r.types["in_out_t"].is_int]
    assert add_int == [I32]  # S3821-3825
    assert [r.support for r in optable.get("ADD").rows if r.types["in_out_t"] is I32] == [("PRO-INT", "PRO-FP")]
    clamp = {r.types["in_out_t"] for r in optable.get("CLAMP").rows}
    assert I32 not in clamp and clamp == {F16, F32, I8, BF16, I16}  # S3383-3413
    mul = optable.get("MUL")
    assert [a.name for a in mul.inputs] == ["input1", "input2", "shift"] and mul.inputs[2].ctc
    assert {(r.types["in_t"], r.types["out_t"]) for r in mul.rows if "PRO-INT" in r.support} == {
        (I16, I32), (I32, I32), (I8, I32)}
    rescale = optable.get("RESCALE")
    assert [a.name for a in rescale.inputs] == ["input", "multiplier", "shift", "input_zp", "output_zp"]
    assert len(optable.get("CAST").rows) == 46
    var = optable.get("VARIABLE_READ").rows[0]
    assert var.support == ("PRO-FP",) and var.also == ("EXT-VARIABLE",)
    cast_bf16_fp8 = [r for r in optable.get("CAST").rows if r.types == {"in_t": BF16, "out_t": DType.FP8E4M3}]
    assert cast_bf16_fp8[0].requirements == ("EXT-BF16", "EXT-FP8E4M3")
    with pytest.raises(InvalidGraphError, match="not a TOSA 1.0 operator"):
        optable.get("FULLY_CONNECTED")


# ------------------------------------------------------------------------------------------ shapes
def _conv_types(ih: int, iw: int, kh: int, kw: int, dt: DType = F32, ic: int = 3, oc: int = 8
                ) -> list[TensorType]:
    return [t((1, ih, iw, ic), dt), t((oc, kh, kw, ic), dt), t((oc,), dt), t((1,), dt), t((1,), dt)]


CONV_F32 = {"stride": [2, 2], "dilation": [1, 1], "acc_type": "FP32"}


def test_conv2d_same_and_valid() -> None:
    # SAME, IH=7, K=3, s=2: out=ceil(7/2)=4, total pad=(4-1)*2+3-7=2 -> [1,1]; (7-1+2-2)/2+1 = 4
    out = infer_result_types("CONV2D", _conv_types(7, 7, 3, 3), {"pad": [1, 1, 1, 1], **CONV_F32})
    assert out == [t((1, 4, 4, 8))]
    # VALID, IH=9, K=3, s=2: (9-1-2)/2+1 = 4
    out = infer_result_types("CONV2D", _conv_types(9, 9, 3, 3), {"pad": [0, 0, 0, 0], **CONV_F32})
    assert out[0].shape == (1, 4, 4, 8)
    # dilation 2, K=3 -> effective 5: (10-1-4)/1+1 = 6
    attrs = {"pad": [0, 0, 0, 0], "stride": [1, 1], "dilation": [2, 2], "acc_type": "FP32"}
    assert infer_result_types("CONV2D", _conv_types(10, 10, 3, 3), attrs)[0].shape == (1, 6, 6, 8)


def test_conv2d_inexact_division_is_error() -> None:
    # VALID, IH=6, K=2, s=3: TF gives 2 rows but (6-1-1) % 3 != 0 (idiv_check, S1668)
    attrs = {"pad": [0, 0, 0, 0], "stride": [3, 3], "dilation": [1, 1], "acc_type": "FP32"}
    with pytest.raises(InvalidGraphError, match="idiv_check"):
        infer_result_types("CONV2D", _conv_types(6, 6, 2, 2), attrs)


def test_int8_conv_row_and_zero_points() -> None:
    ts = _conv_types(4, 4, 1, 1, I8)
    ts[2] = t((8,), I32)
    attrs = {"pad": [0, 0, 0, 0], "stride": [1, 1], "dilation": [1, 1], "acc_type": "INT32"}
    out = infer_result_types("CONV2D", ts, attrs)
    assert out == [t((1, 4, 4, 8), I32)]
    row = validate("CONV2D", ts, out, attrs, [None, np.zeros((8, 1, 1, 3)), None, np.array([-5]), np.array([0])])
    assert row.support == ("PRO-INT",)
    with pytest.raises(InvalidGraphError, match="no type row"):  # acc_type must match acc_t
        validate("CONV2D", ts, out, {**attrs, "acc_type": "INT48"})
    fts = _conv_types(4, 4, 1, 1)
    fout = infer_result_types("CONV2D", fts, {**attrs, "acc_type": "FP32"})
    with pytest.raises(InvalidGraphError, match="zero point must be zero"):  # S1663
        validate("CONV2D", fts, fout, {**attrs, "acc_type": "FP32"},
                 [None, None, None, np.array([1.0]), np.array([0.0])])


def test_int16_conv_needs_i8_weights_and_i48() -> None:
    ts = [t((1, 4, 4, 3), I16), t((8, 1, 1, 3), I8), t((8,), I48), t((1,), I16), t((1,), I8)]
    attrs = {"pad": [0, 0, 0, 0], "stride": [1, 1], "dilation": [1, 1], "acc_type": "INT48"}
    assert infer_result_types("CONV2D", ts, attrs) == [t((1, 4, 4, 8), I48)]
    bad = [t((1, 4, 4, 3), I16), t((8, 1, 1, 3), I16), t((8,), I48), t((1,), I16), t((1,), I16)]
    with pytest.raises(InvalidGraphError, match=r"CONV2D: no type row for in_t=i16, weight_t=i16"):
        infer_result_types("CONV2D", bad, attrs)


def test_depthwise_and_bias_rule() -> None:
    ts = [t((1, 8, 8, 4)), t((3, 3, 4, 2)), t((8,)), t((1,)), t((1,))]
    attrs = {"pad": [1, 1, 1, 1], "stride": [1, 1], "dilation": [1, 1], "acc_type": "FP32"}
    assert infer_result_types("DEPTHWISE_CONV2D", ts, attrs)[0].shape == (1, 8, 8, 8)  # C*M = 8
    ts[2] = t((5,))
    with pytest.raises(InvalidGraphError, match="bias"):  # BC == C*M or 1 (S2323)
        infer_result_types("DEPTHWISE_CONV2D", ts, attrs)


def test_transpose_conv_out_pad_formula() -> None:
    # S3262: OH = (IH-1)*stride_y + out_pad_top + out_pad_bottom + KH = 3*2 + 0 + 1 + 3 = 10
    ts = [t((1, 4, 5, 3)), t((6, 3, 3, 3)), t((1,)), t((1,)), t((1,))]
    attrs = {"out_pad": [0, 1, -1, 0], "stride": [2, 2], "acc_type": "FP32"}
    assert infer_result_types("TRANSPOSE_CONV2D", ts, attrs)[0].shape == (1, 10, 10, 6)  # OW = 4*2 - 1 + 0 + 3
    with pytest.raises(InvalidGraphError, match="out_pad"):  # S3259
        infer_result_types("TRANSPOSE_CONV2D", ts, {**attrs, "out_pad": [-3, 0, 0, 0]})


def test_pools() -> None:
    attrs = {"kernel": [2, 2], "stride": [2, 2], "pad": [0, 0, 0, 0], "acc_type": "FP32"}
    ts = [t((1, 8, 6, 3)), t((1,)), t((1,))]
    assert infer_result_types("AVG_POOL2D", ts, attrs) == [t((1, 4, 3, 3))]
    mp = {"kernel": [3, 3], "stride": [1, 1], "pad": [1, 1, 1, 1]}
    assert infer_result_types("MAX_POOL2D", [t((1, 5, 5, 2), I8)], mp) == [t((1, 5, 5, 2), I8)]
    with pytest.raises(InvalidGraphError, match="smaller than kernel"):  # S2844-2845
        infer_result_types("MAX_POOL2D", [t((1, 5, 5, 2), I8)], {**mp, "pad": [3, 0, 0, 0]})
    with pytest.raises(InvalidGraphError, match="smaller than kernel"):  # S1341
        infer_result_types("AVG_POOL2D", ts, {**attrs, "pad": [0, 0, 2, 0]})
    with pytest.raises(InvalidGraphError, match="idiv_check"):  # (8-3)%2 != 0, S1343
        infer_result_types("AVG_POOL2D", ts, {**attrs, "kernel": [3, 3]})


def test_resize_formula() -> None:
    # TF half-pixel 4->8: g=4, n=2*8/4=4, d=2*4/4=2, offset=(d-n)/2=-1, border=d*(OH-1)-n*(IH-1)+offset=1
    # S9234: OH = ((4-1)*4 - (-1) + 1) / 2 + 1 = 8
    ins = [t((1, 4, 4, 3), I8), t((4,), SHAPE), t((2,), SHAPE), t((2,), SHAPE)]
    consts = [None, np.array([4, 2, 4, 2]), np.array([-1, -1]), np.array([1, 1])]
    out = infer_result_types("RESIZE", ins, {"mode": "BILINEAR"}, operand_consts=consts)
    assert out == [t((1, 8, 8, 3), I32)]  # integer bilinear widens to i32 (S9155-9163)
    out = infer_result_types("RESIZE", ins, {"mode": "NEAREST_NEIGHBOR"}, operand_consts=consts)
    assert out == [t((1, 8, 8, 3), I8)]
    with pytest.raises(InvalidGraphError, match="idiv_check"):
        infer_result_types("RESIZE", ins, {"mode": "BILINEAR"}, operand_consts=consts[:3] + [np.array([0, 0])])
    with pytest.raises(InvalidGraphError, match="2048"):  # S9227
        infer_result_types("RESIZE", ins, {"mode": "BILINEAR"},
                           operand_consts=[None, np.array([4096, 2, 4, 2]), consts[2], consts[3]])


def test_reduce_argmax_concat_and_layout_ops() -> None:
    assert infer_result_types("REDUCE_SUM", [t((2, 3, 4))], {"axis": 1}) == [t((2, 1, 4))]  # S7663: dim stays 1
    assert infer_result_types("REDUCE_MAX", [t((2, 3, 4), I8)], {"axis": 2})[0].shape == (2, 3, 1)
    assert infer_result_types("ARGMAX", [t((2, 3, 4))], {"axis": 1}) == [t((2, 4), I32)]
    with pytest.raises(InvalidGraphError, match="axis"):
        infer_result_types("REDUCE_SUM", [t((2, 3))], {"axis": 2})
    assert infer_result_types("CONCAT", [t((2, 3)), t((2, 5)), t((2, 1))], {"axis": 1}) == [t((2, 9))]
    with pytest.raises(InvalidGraphError, match="differs"):
        infer_result_types("CONCAT", [t((2, 3)), t((3, 5))], {"axis": 1})
    assert infer_result_types("TRANSPOSE", [t((2, 3, 4))], {"perms": [2, 0, 1]}) == [t((4, 2, 3))]
    with pytest.raises(InvalidGraphError, match="permutation"):
        infer_result_types("TRANSPOSE", [t((2, 3, 4))], {"perms": [0, 0, 1]})
    pad = infer_result_types("PAD", [t((2, 3), I8), t((4,), SHAPE), t((1,), I8)], {},
                             operand_consts=[None, np.array([1, 2, 0, 3]), np.array([0])])
    assert pad == [t((5, 6), I8)]
    sl = infer_result_types("SLICE", [t((4, 5)), t((2,), SHAPE), t((2,), SHAPE)], {},
                            operand_consts=[None, np.array([1, 2]), np.array([3, 3])])
    assert sl == [t((3, 3))]
    with pytest.raises(InvalidGraphError, match="exceeds"):  # S8417
        infer_result_types("SLICE", [t((4, 5)), t((2,), SHAPE), t((2,), SHAPE)], {},
                           operand_consts=[None, np.array([2, 2]), np.array([3, 3])])
    tile = infer_result_types("TILE", [t((2, 3), BOOL), t((2,), SHAPE)], {}, operand_consts=[None, np.array([3, 1])])
    assert tile == [t((6, 3), BOOL)]
    assert infer_result_types("GATHER", [t((2, 10, 4)), t((2, 3), I32)], {}) == [t((2, 3, 4))]
    assert infer_result_types("SCATTER", [t((2, 10, 4)), t((2, 3), I32), t((2, 3, 4))], {}) == [t((2, 10, 4))]
    assert infer_result_types("RFFT2D", [t((1, 8, 16))], {}) == [t((1, 8, 9)), t((1, 8, 9))]
    with pytest.raises(InvalidGraphError, match="power of two"):  # S2960
        infer_result_types("RFFT2D", [t((1, 8, 12))], {})
    mm = [t((2, 3, 5), F16), t((2, 5, 7), F16), t((1,), F16), t((1,), F16)]
    assert infer_result_types("MATMUL", mm, {}) == [t((2, 3, 7), F16)]
    assert infer_result_types("MATMUL", mm, {}, out_dtype=F32) == [t((2, 3, 7), F32)]


def test_elementwise_broadcast_and_types() -> None:
    assert infer_result_types("ADD", [t((2, 1, 4)), t((1, 3, 4))], {}) == [t((2, 3, 4))]
    with pytest.raises(InvalidGraphError, match="equal rank"):  # S11252
        infer_result_types("ADD", [t((2, 3)), t((3,))], {})
    with pytest.raises(InvalidGraphError, match="no type row for in_out_t=i16"):  # S3821-3825
        infer_result_types("ADD", [t((2,), I16), t((2,), I16)], {})
    assert infer_result_types("MUL", [t((2,), I8), t((2,), I8), t((1,), I8)], {}) == [t((2,), I32)]
    assert infer_result_types("EQUAL", [t((2,), I32), t((2,), I32)], {}) == [t((2,), BOOL)]
    assert infer_result_types("SELECT", [t((2, 1), BOOL), t((1, 3)), t((2, 3))], {}) == [t((2, 3))]
    with pytest.raises(InvalidGraphError, match="no type row"):  # condition must be bool
        infer_result_types("SELECT", [t((2, 3), I8), t((2, 3)), t((2, 3))], {})
    with pytest.raises(InvalidGraphError, match="no type row"):  # no i32 CLAMP
        infer_result_types("CLAMP", [t((2,), I32)], {"min_val": 0, "max_val": 6})
    with pytest.raises(InvalidGraphError, match="no type row"):  # SIGMOID is float only
        infer_result_types("SIGMOID", [t((2,), I8)], {})
    assert infer_result_types("TABLE", [t((3,), I16), t((513,), I16)], {}) == [t((3,), I32)]


def test_cast_rescale_need_out_dtype() -> None:
    with pytest.raises(InvalidGraphError, match="out_dtype"):
        infer_result_types("CAST", [t((2,))], {})
    assert infer_result_types("CAST", [t((2,))], {}, out_dtype=I8) == [t((2,), I8)]
    with pytest.raises(InvalidGraphError, match="no type row gives"):
        infer_result_types("CAST", [t((2,), BOOL)], {}, out_dtype=F32)  # bool<->float is not in the table
    rs = [t((1, 4), I32), t((1,), I32), t((1,), I8), t((1,), I32), t((1,), I8)]
    attrs = {"scale32": True, "rounding_mode": "DOUBLE_ROUND", "per_channel": False, "input_unsigned": False,
             "output_unsigned": False}
    out = infer_result_types("RESCALE", rs, attrs, out_dtype=I8)
    consts = [None, np.array([1 << 30]), np.array([30]), np.array([0]), np.array([-3])]
    assert validate("RESCALE", rs, out, attrs, consts).support == ("PRO-INT",)
    with pytest.raises(InvalidGraphError, match="zero point must be 0"):  # S10074
        validate("RESCALE", rs, out, attrs, consts[:3] + [np.array([5]), consts[4]])
    with pytest.raises(InvalidGraphError, match="shift values"):  # REQUIRE 2..62 (S11744)
        validate("RESCALE", rs, out, attrs, consts[:2] + [np.array([70])] + consts[3:])
    with pytest.raises(InvalidGraphError, match="no type row"):  # scale32=false wants an i16 multiplier
        validate("RESCALE", rs, out, {**attrs, "scale32": False, "rounding_mode": "SINGLE_ROUND"})
    r48 = [t((1, 4), I48), t((1,), I16), t((1,), I8), t((1,), I48), t((1,), I8)]
    validate("RESCALE", r48, [t((1, 4), I8)], {**attrs, "scale32": False, "rounding_mode": "SINGLE_ROUND"})
    with pytest.raises(InvalidGraphError, match="scale32 must be false"):  # S10080
        validate("RESCALE", [r48[0], t((1,), I32)] + r48[2:], [t((1, 4), I8)],
                 {**attrs, "rounding_mode": "SINGLE_ROUND"})


# ----------------------------------------------------------------------------------- ERROR_IF cases
def test_reshape_rules() -> None:
    ins = [t((2, 6)), t((2,), SHAPE)]
    assert infer_result_types("RESHAPE", ins, {}, operand_consts=[None, np.array([3, 4])]) == [t((3, 4))]
    with pytest.raises(InvalidGraphError, match="12 elements"):  # S8145
        infer_result_types("RESHAPE", ins, {}, operand_consts=[None, np.array([5, 2])])
    with pytest.raises(InvalidGraphError, match="dimension < 1"):  # no -1 (S760)
        infer_result_types("RESHAPE", ins, {}, operand_consts=[None, np.array([-1, 4])])
    with pytest.raises(InvalidGraphError, match="compile-time constant"):  # shape is CTC
        validate("RESHAPE", ins, [t((3, 4))], {}, [None, None])
    with pytest.raises(InvalidGraphError, match="elements"):  # count checked even without the const
        validate("RESHAPE", ins, [t((5, 2))], {})
    validate("RESHAPE", ins, [t((3, 4))], {}, [None, None], dynamic=True)  # EXT-DYNAMIC lifts CTC
    with pytest.raises(InvalidGraphError, match="needs the value"):
        infer_result_types("RESHAPE", ins, {})


def test_validate_counts_ranks_attrs() -> None:
    with pytest.raises(InvalidGraphError, match="expects 5 operands"):
        validate("CONV2D", _conv_types(4, 4, 1, 1)[:3], [t((1, 4, 4, 8))], {})
    with pytest.raises(InvalidGraphError, match="rank 4"):
        validate("CONV2D", [t((4, 4, 3))] + _conv_types(4, 4, 1, 1)[1:], [t((1, 4, 4, 8))],
                 {"pad": [0] * 4, "stride": [1, 1], "dilation": [1, 1], "acc_type": "FP32"})
    with pytest.raises(InvalidGraphError, match="missing required attribute acc_type"):
        validate("CONV2D", _conv_types(4, 4, 1, 1), [t((1, 4, 4, 8))], {"pad": [0] * 4, "stride": [1, 1],
                                                                        "dilation": [1, 1]})
    with pytest.raises(InvalidGraphError, match="unknown attribute 'shape'"):
        validate("RESHAPE", [t((2, 6)), t((2,), SHAPE)], [t((3, 4))], {"shape": [3, 4]})
    with pytest.raises(InvalidGraphError, match="not one of"):
        validate("MAXIMUM", [t((2,)), t((2,))], [t((2,))], {"nan_mode": "FOO"})
    with pytest.raises(InvalidGraphError, match="max_val=0 < min_val=6"):  # S3418
        validate("CLAMP", [t((2,), I8)], [t((2,), I8)], {"min_val": 6, "max_val": 0})
    with pytest.raises(InvalidGraphError, match="outside the range"):
        validate("CLAMP", [t((2,), I8)], [t((2,), I8)], {"min_val": 0, "max_val": 300})
    with pytest.raises(InvalidGraphError, match="shift=1 must be 0"):  # S5052
        validate("MUL", [t((2,), I8), t((2,), I8), t((1,), I8)], [t((2,), I32)], {}, [None, None, np.array([1])])
    with pytest.raises(InvalidGraphError, match=r"table must have shape \[256\]"):  # TABLE_SIZE (S5359-5369)
        validate("TABLE", [t((3,), I8), t((513,), I8)], [t((3,), I8)], {})
    with pytest.raises(InvalidGraphError, match="dimension < 1"):  # S760
        validate("ABS", [t((0,))], [t((0,))], {})
    with pytest.raises(InvalidGraphError, match="rule gives"):
        validate("ADD", [t((2, 3)), t((2, 3))], [t((2, 4))], {})
    with pytest.raises(InvalidGraphError, match="not a TOSA 1.0 type"):
        validate("IDENTITY", [t((2,), DType.INT64)], [t((2,), DType.INT64)], {})


def test_control_flow_and_variables_types() -> None:
    assert infer_result_types("WHILE_LOOP", [t((2,), I32), t((1,), BOOL)], {}) == [t((2,), I32), t((1,), BOOL)]
    with pytest.raises(InvalidGraphError, match="exactly one element"):  # S10523
        validate("COND_IF", [t((2,), BOOL), t((3,))], [t((3,))], {})
    validate("COND_IF", [t((1,), BOOL), t((3,))], [t((3,))], {})
    then = Graph("then")
    then.outputs = [then.add_input("x", t((3,)))]
    validate("COND_IF", [t((1,), BOOL), t((3,))], [t((3,))], {"then_graph": then, "else_graph": then})
    with pytest.raises(InvalidGraphError, match="then_graph outputs"):  # S10521
        validate("COND_IF", [t((1,), BOOL), t((3,))], [t((4,))], {"then_graph": then})
    body = Graph("body")
    body.outputs = [body.add_input("x", t((3,)))]
    with pytest.raises(InvalidGraphError, match="one bool"):  # S10601-10602: cond graph returns a bool
        validate("WHILE_LOOP", [t((3,))], [t((3,))], {"cond_graph": body, "body_graph": body})
    validate("VARIABLE", [], [], {"name": "v", "var_shape": [2, 3], "type": "fp32"})
    with pytest.raises(InvalidGraphError, match="no type row"):  # i16 variables are not in the table
        validate("VARIABLE", [], [], {"name": "v", "var_shape": [2], "type": "i16"})
    assert infer_result_types("VARIABLE_READ", [], {"name": "v", "type": F32, "var_shape": [2]}) == [t((2,))]
    assert infer_result_types("CONST_SHAPE", [], {"values": np.array([1, 2, 3])}) == [t((3,), SHAPE)]
    assert infer_result_types("CONST", [], {"values": np.zeros((2, 2), np.int8)}) == [t((2, 2), I8)]


def test_shapes_module_direct() -> None:
    assert shapes.broadcast_shape("ADD", (1, 3), (2, 1)) == (2, 3)
    assert shapes.result_shapes("tosa.REDUCE_ANY", [t((2, 3), BOOL)], {"axis": 0}) == [(1, 3)]
    # symbolic dims pass through elementwise ops
    assert shapes.result_shapes("ADD", [TensorType(("n", 3), F32), t((1, 3))], {}) == [("n", 3)]


# --------------------------------------------------------------------------------------- profiles
def _graph_int8_conv(rounding: str = "DOUBLE_ROUND") -> Graph:
    g = Graph()
    x = g.add_input("x", t((1, 4, 4, 3), I8))
    w = g.add_const(np.ones((8, 1, 1, 3), np.int8))
    b = g.add_const(np.zeros(8, np.int32))
    zi, zw = g.add_const(np.array([-1], np.int8)), g.add_const(np.array([0], np.int8))
    attrs = {"pad": [0] * 4, "stride": [1, 1], "dilation": [1, 1], "acc_type": "INT32", "local_bound": False}
    conv = g.add_op("tosa.CONV2D", [x, w, b, zi, zw], [t((1, 4, 4, 8), I32)], attrs)
    consts = [g.add_const(np.array([1 << 30], np.int32)), g.add_const(np.array([30], np.int8)),
              g.add_const(np.array([0], np.int32)), g.add_const(np.array([0], np.int8))]
    rattrs = {"scale32": True, "rounding_mode": rounding, "per_channel": False, "input_unsigned": False,
              "output_unsigned": False}
    rs = g.add_op("tosa.RESCALE", [conv.result, *consts], [t((1, 4, 4, 8), I8)], rattrs)
    g.outputs = [rs.result]
    return g


def test_requirements_int8() -> None:
    g = _graph_int8_conv()
    assert profiles.requirements(g) == (["PRO-INT"], ["EXT-DOUBLEROUND"])
    assert profiles.requirements(_graph_int8_conv("SINGLE_ROUND")) == (["PRO-INT"], [])
    assert profiles.requirements(_graph_int8_conv("INEXACT_ROUND")) == (["PRO-INT"], ["EXT-INEXACTROUND"])
    assert profiles.level_violations(g) == []
    target = profiles.tosa_opt_target(["PRO-INT"], ["EXT-INT16", "EXT-DOUBLEROUND"])
    assert target == "specification_version=1.0 profiles=pro_int extensions=int16,doubleround level=8k"


def test_requirements_shared_rows_and_extensions() -> None:
    g = Graph()
    a = g.add_input("a", t((2,), I32))
    add = g.add_op("tosa.ADD", [a, a], [t((2,), I32)])
    g.outputs = [add.result]
    assert profiles.requirements(g) == (["PRO-INT"], [])  # "PRO-INT or PRO-FP", integer data
    f = g.add_input("f", t((2,)))
    neg = g.add_op("tosa.SIGMOID", [f], [t((2,))])
    g.outputs.append(neg.result)
    assert profiles.requirements(g) == (["PRO-FP"], [])  # the shared i32 ADD rides on PRO-FP
    h = g.add_input("h", t((2,), BF16))
    g.outputs.append(g.add_op("tosa.TANH", [h], [t((2,), BF16)]).result)
    assert profiles.requirements(g) == (["PRO-FP"], ["EXT-BF16"])
    s = g.add_input("s", t((2,), I16))
    sh = g.add_const(np.array([2], np.int8))
    ts = g.add_const(np.zeros(513, np.int16))
    g.outputs.append(g.add_op("tosa.TABLE", [s, ts], [t((2,), I32)]).result)
    _ = sh
    assert profiles.requirements(g) == (["PRO-FP", "PRO-INT"], ["EXT-BF16", "EXT-INT16"])


def test_requirements_control_flow_variables_dynamic() -> None:
    body = Graph("then")
    bi = body.add_input("x", t((2,)))
    body.outputs = [body.add_op("tosa.EXP", [bi], [t((2,))]).result]
    g = Graph()
    c = g.add_input("c", t((1,), BOOL))
    x = g.add_input("x", t((2,)))
    cond = g.add_op("tosa.COND_IF", [c, x], [t((2,))], regions=[body, body])
    g.outputs = [cond.result]
    assert profiles.requirements(g) == (["PRO-FP"], ["EXT-CONTROLFLOW"])
    g.add_op("tosa.VARIABLE", [], [], {"name": "v", "var_shape": [2], "type": "i8"})
    assert profiles.requirements(g) == (["PRO-FP", "PRO-INT"], ["EXT-CONTROLFLOW", "EXT-VARIABLE"])
    g2 = Graph()
    y = g2.add_input("y", t((2, 6)))
    shp = g2.add_input("shp", t((2,), SHAPE))  # a non-constant shape operand
    g2.outputs = [g2.add_op("tosa.RESHAPE", [y, shp], [t((3, 4))]).result]
    assert profiles.requirements(g2) == (["PRO-FP"], ["EXT-DYNAMIC"])


def test_level_violations() -> None:
    g = Graph()
    x = g.add_input("x", t((1, 1, 1, 1, 1, 1, 2)))
    g.outputs = [g.add_op("tosa.ABS", [x], [t((1, 1, 1, 1, 1, 1, 2))]).result]
    msgs = profiles.level_violations(g)
    assert len(msgs) == 2 and all("MAX_RANK 6" in m for m in msgs)
    assert profiles.level_violations(g, profiles.LEVEL_NONE) == []
    g2 = Graph()
    y = g2.add_input("y", t((1, 9000, 8, 1)))
    op = g2.add_op("tosa.MAX_POOL2D", [y], [t((1, 1, 8, 1))],
                   {"kernel": [1, 1], "stride": [8999, 1], "pad": [0, 0, 0, 0]})
    g2.outputs = [op.result]
    assert any("MAX_STRIDE" in m for m in profiles.level_violations(g2))


def test_validate_op_on_ir_graph() -> None:
    g = _graph_int8_conv()
    for op in g.topological_order():
        if op.name in ("tosa.CONV2D", "tosa.RESCALE"):
            assert validation.validate_op(op).support == ("PRO-INT",)
    conv = next(op for op in g.topological_order() if op.opcode == "CONV2D")
    assert match_row("CONV2D", [v.type for v in conv.operands], None, {}).types["in_t"] is I8


# ------------------------------------------------------------------- every row of every op round-trips
_CONV_A = {"pad": [0, 0, 0, 0], "stride": [1, 1], "dilation": [1, 1]}
_RESCALE_A = {"scale32": True, "rounding_mode": "SINGLE_ROUND", "per_channel": False, "input_unsigned": False,
              "output_unsigned": False}
#: op -> (operand shapes, attrs, shape_t constants by operand index)
_SAMPLES: dict[str, tuple[list[tuple[int, ...]], dict[str, Any], dict[int, list[int]]]] = {
    "ARGMAX": ([(2, 3)], {"axis": 1}, {}),
    "AVG_POOL2D": ([(1, 4, 4, 2), (1,), (1,)], {"kernel": [2, 2], "stride": [2, 2], "pad": [0, 0, 0, 0]}, {}),
    "CONV2D": ([(1, 4, 4, 2), (3, 1, 1, 2), (3,), (1,), (1,)], _CONV_A, {}),
    "CONV3D": ([(1, 2, 4, 4, 2), (3, 1, 1, 1, 2), (3,), (1,), (1,)],
               {"pad": [0] * 6, "stride": [1] * 3, "dilation": [1] * 3}, {}),
    "DEPTHWISE_CONV2D": ([(1, 4, 4, 2), (1, 1, 2, 2), (4,), (1,), (1,)], _CONV_A, {}),
    "FFT2D": ([(1, 4, 8), (1, 4, 8)], {"inverse": False}, {}),
    "MATMUL": ([(1, 2, 3), (1, 3, 4), (1,), (1,)], {}, {}),
    "MAX_POOL2D": ([(1, 4, 4, 2)], {"kernel": [2, 2], "stride": [2, 2], "pad": [0, 0, 0, 0]}, {}),
    "RFFT2D": ([(1, 4, 8)], {}, {}),
    "TRANSPOSE_CONV2D": ([(1, 4, 4, 2), (3, 2, 2, 2), (3,), (1,), (1,)], {"out_pad": [0] * 4, "stride": [2, 2]}, {}),
    "CLAMP": ([(2, 3)], {"min_val": 0, "max_val": 6}, {}),
    "ARITHMETIC_RIGHT_SHIFT": ([(2, 3), (1, 3)], {"round": False}, {}),
    "MUL": ([(2, 3), (2, 3), (1,)], {}, {}),
    "TABLE": ([(2, 3), (0,)], {}, {}),  # table length filled from TABLE_SIZE
    "NEGATE": ([(2, 3), (1,), (1,)], {}, {}),
    "SELECT": ([(2, 3), (2, 3), (2, 3)], {}, {}),
    "CONCAT": ([(2, 3), (2, 1)], {"axis": 1}, {}),
    "PAD": ([(2, 3), (4,), (1,)], {}, {1: [1, 0, 0, 2]}),
    "RESHAPE": ([(2, 3), (1,)], {}, {1: [6]}),
    "REVERSE": ([(2, 3)], {"axis": 0}, {}),
    "SLICE": ([(2, 3), (2,), (2,)], {}, {1: [0, 1], 2: [2, 2]}),
    "TILE": ([(2, 3), (2,)], {}, {1: [2, 1]}),
    "TRANSPOSE": ([(2, 3)], {"perms": [1, 0]}, {}),
    "GATHER": ([(1, 5, 3), (1, 2)], {}, {}),
    "SCATTER": ([(1, 5, 3), (1, 2), (1, 2, 3)], {}, {}),
    "RESIZE": ([(1, 4, 4, 2), (4,), (2,), (2,)], {}, {1: [2, 1, 2, 1], 2: [0, 0], 3: [0, 0]}),
    "RESCALE": ([(2, 3), (1,), (1,), (1,), (1,)], _RESCALE_A, {}),
    "CONST": ([], {"values": np.zeros((2, 3))}, {}),
    "CUSTOM": ([(2, 3)], {"operator_name": "x", "domain_name": "d", "implementation_attrs": b""}, {}),
    "COND_IF": ([(1,), (2, 3)], {}, {}),
    "WHILE_LOOP": ([(2, 3)], {}, {}),
    "VARIABLE": ([], {"name": "v", "var_shape": [2, 3]}, {}),
    "VARIABLE_WRITE": ([(2, 3)], {"name": "v"}, {}),
    "VARIABLE_READ": ([], {"name": "v", "var_shape": [2, 3]}, {}),
    "CONST_SHAPE": ([], {"values": np.array([2, 3])}, {}),
}


def _sample(name: str) -> tuple[list[tuple[int, ...]], dict[str, Any], dict[int, list[int]]]:
    if name in _SAMPLES:
        return _SAMPLES[name]
    spec = optable.get(name)
    n = len(spec.inputs)
    attrs: dict[str, Any] = {"axis": 0} if name.startswith("REDUCE_") else {}
    return [(2, 3)] * n, attrs, {}


def test_every_row_infers_and_validates() -> None:
    checked = 0
    for name, spec in OPS.items():
        shapes_, base_attrs, shape_consts = _sample(name)
        for row in spec.rows:
            attrs = dict(base_attrs)
            if "acc_type" in spec.attr_map:
                attrs["acc_type"] = {v: k for k, v in optable.ACC_TYPES.items()}[row.types["acc_t"]]
            if name == "RESIZE":
                attrs["mode"] = "NEAREST_NEIGHBOR" if "nearest" in row.mode or "," not in row.mode else "BILINEAR"
            if name == "RESCALE" and row.types["in_t"] is I48:
                attrs["scale32"] = False
            if name == "VARIABLE" or name == "VARIABLE_READ":
                attrs["type"] = row.types["var_t"]
            if name == "CLAMP" and row.types["in_out_t"].is_float:
                attrs.update(min_val=0.0, max_val=6.0)
            if name == "CONST":
                attrs["values"] = np.zeros((2, 3), row.types["out_t"].np_dtype()) \
                    if row.types["out_t"] in (F32, F16, I8, I16, I32, BOOL) else np.zeros((2, 3))
            pairs = optable.bind_operands(name, shapes_)
            types: list[TensorType] = []
            consts: list[np.ndarray | None] = []
            for k, (arg, shp) in enumerate(pairs):
                dt = validation._expected(arg.type_var, row, attrs) or F32
                if name == "TABLE" and arg.role == "table":
                    shp = (optable.TABLE_SIZE[row.types["in_t"]],)
                types.append(t(shp, dt))
                if arg.role == "shape":
                    consts.append(np.array(shape_consts[k]))
                elif arg.role == "shift":
                    consts.append(np.array([30 if name == "RESCALE" else 0]))
                elif arg.ctc:
                    consts.append(np.array([1 << 14 if arg.role == "multiplier" else 0]))
                else:
                    consts.append(None)
            out_arg = spec.outputs[0] if spec.outputs and spec.outputs[0].role != "tensor_list" else None
            out_dt = validation._expected(out_arg.type_var, row, attrs) if out_arg else None
            if name == "CONST":
                out_dt = row.types["out_t"]
            if name in ("CUSTOM", "COND_IF"):
                results = [t((2, 3))]
            else:
                results = infer_result_types(name, types, attrs, out_dtype=out_dt, operand_consts=consts)
            if name == "VARIABLE_READ":  # type and shape come from the VARIABLE declaration, not attributes
                attrs = {"name": "v"}
            got = validate(name, types, results, attrs, consts)
            assert got == row or name in ("CONST", "CUSTOM", "WHILE_LOOP"), (name, row, got)
            checked += 1
    assert checked == sum(len(s.rows) for s in OPS.values())
