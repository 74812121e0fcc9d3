"""benchmarks/bench_npu.py: reading Vela's per-layer report and grouping its cycles by operation kind."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from tests.scripts import load_script
from tests.vela_tools import VelaLayer, read_per_layer

ROOT = Path(__file__).resolve().parent.parent

#: the head and three rows of a per-layer report Vela 5.2.0 wrote for a TOSA file (``--verbose-performance``)
_CSV = """\
Original Operator,NNG Operator,Target,Staging Usage,Peak% (Staging),Op Cycles,Network% (cycles),NPU,SRAM AC,\
DRAM AC,OnFlash AC,OffFlash AC,MAC Count,Network% (MAC),Util% (MAC),Name
Conv2D,Conv2D,NPU,17216,4.568614130434782,36093,9.757211869882214,8616,416,36093,0,0,442368,3.45,4.78,conv_out
Conv2D,Relu,NPU,0,0.0,0,0.0,0,0,0,0,0,0,0.0,100,conv_out
Cast,Add,NPU,0,0.0,5120,1.3,5120,0,0,0,0,0,0.0,0.0,cast_out
Table,LUT,NPU,0,0.0,27802,2.1,0,0,0,0,0,20480,0.1,0.2,lut_out
Concat,MemoryCopy,NPU,0,0.0,900,0.2,900,0,0,0,0,0,0.0,0.0,cat_out
Softmax,MaxPool,NPU,0,0.0,3024,0.8,3024,0,0,0,0,20480,0.16,2.65,sm_0
Frobnicate,Frobnicate,CPU,0,0.0,7,0.0,0,0,0,0,0,0,0.0,0.0,odd
"""


def _bench() -> ModuleType:
    return load_script("benchmarks/bench_npu.py")


def test_read_per_layer(tmp_path: Path) -> None:
    p = tmp_path / "m_per-layer.csv"
    p.write_text(_CSV)
    rows = read_per_layer(p)
    assert len(rows) == 7
    assert rows[0] == VelaLayer("Conv2D", "Conv2D", "NPU", 36093, 442368, "conv_out")
    assert rows[1].cycles == 0 and rows[1].op == "Relu"
    assert rows[-1].target == "CPU"


def test_group_cycles(tmp_path: Path) -> None:
    p = tmp_path / "m_per-layer.csv"
    p.write_text(_CSV)
    groups = _bench().group_cycles(read_per_layer(p))
    assert groups == {"conv": 36093, "depthwise": 0, "elementwise": 0, "rescale": 5120, "resize": 0,
                      "table": 27802, "pooling": 3024, "memory": 900, "other": 7}
    assert sum(groups.values()) == 36093 + 5120 + 27802 + 900 + 3024 + 7
