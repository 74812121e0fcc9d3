"""Every conversion option, in one typed record: :class:`ConvertOptions`.

:func:`tf2tosa.convert`'s keywords are its fields, one to one (:meth:`ConvertOptions.from_keywords` refuses any other
name with a :class:`TypeError` naming the closest valid ones); the command line builds the same record, every
frontend and pass reads it, and each legalization rule sees it as ``b.context.options``.  Each field's ``doc`` and
``cli`` metadata are the option's documentation: ``tools/options_doc.py`` writes them to ``docs/api-options.md``.

This module imports nothing of tf2tosa, so every layer may read it.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: WHILE loops with a static trip count up to this many iterations are unrolled (``--max-unroll``)
MAX_UNROLL = 1024


def _opt(default: Any, doc: str, cli: str | None = None) -> Any:
    """A field with its documentation (``doc``) and the command-line flag that sets it (``cli``)."""
    return field(default=default, metadata={"doc": doc, "cli": cli})


@dataclass(frozen=True)
class ConvertOptions:
    """The options of one conversion (:func:`tf2tosa.convert`'s keywords)."""

    input_shapes: Mapping[str, Sequence[int]] | None = _opt(
        None, "Whole input shapes by input name, e.g. ``{\"input\": (1, 224, 224, 3)}``; sets their unknown "
        "dimensions.", "--input-shape NAME=DIMS")
    dims: Mapping[str, int] | None = _opt(
        None, "The size of every unknown dimension named by a symbol (``batch``, ``d<k>``: ``tf2tosa inspect`` lists "
        "them), e.g. ``{\"batch\": 4}``.  An unknown dimension given neither way takes its default (the size stored "
        "in the ``.tflite``, else 1) with a warning; ``graph.record.fixed_dims`` records each.",
        "--dim SYMBOL=VALUE")
    rounding: str = _opt(
        "double", "Requantization rounding of integer graphs: ``\"double\"`` (bit-exact with TFLite's reference "
        "kernels, needs EXT-DOUBLEROUND) or ``\"single\"`` (the PRO-INT core, SINGLE_ROUND).", "--rounding")
    fold: bool = _opt(True, "Fold ops with constant operands at conversion time.")
    signature: str = _opt("serving_default", "The SavedModel signature to convert.", "--signature")
    io: str = _opt(
        "float", "Model I/O: ``\"float\"`` keeps the source's edges; ``\"int\"`` moves the QUANTIZE/DEQUANTIZE at a "
        "quantized model's edges to the host, so the program takes and returns its int8/int16 tensors "
        "(:attr:`TosaModel.io_quantization` gives their scales and zero points; an NNEF model's integer edges are "
        "recorded as they are).", "--io")
    fp16_weights: str = _opt(
        "keep", "Float16 weights (TFLite's DEQUANTIZE of an fp16 constant): ``\"keep\"`` stores fp16 constants and a "
        "CAST to fp32, so the ``.tosa`` stays about the source's size; ``\"expand\"`` stores fp32 constants.",
        "--fp16-weights")
    hybrid: str = _opt(
        "kernel", "Dynamic-range (\"hybrid\") ops, int8 weights and float32 activations: ``\"kernel\"`` follows "
        "LiteRT's hybrid kernels (activations quantized on the fly, an int8 product, float rescaling); "
        "``\"dequantize\"`` dequantizes the weights in the graph and runs the ops in float (recorded as inexact).",
        "--hybrid")
    state_io: bool = _opt(
        False, "Turn each EXT-VARIABLE variable into a state input ``NAME_state_in`` and output ``NAME_state_out`` "
        "(see :meth:`TosaModel.session`).", "--state-io")
    keep_variables: Sequence[str] | str | None = _opt(
        None, "TensorFlow sources: the resource variables (names, or ``\"all\"``) kept as TOSA variables "
        "(EXT-VARIABLE) that hold their state across invocations instead of being frozen.", "--keep-variables")
    custom_ops: bool = _opt(
        False, "Emit ops that cannot be lowered as TOSA CUSTOM operators instead of failing.", "--custom-ops")
    max_unroll: int | None = _opt(
        None, "Unroll WHILE loops with a static trip count up to this many iterations (0: emit WHILE_LOOP). Not "
        f"given: up to {MAX_UNROLL}, except that a loop whose body runs hybrid ops stays a WHILE_LOOP when the "
        "target has EXT-CONTROLFLOW.",
        "--max-unroll")
    qat: str = _opt(
        "auto", "TensorFlow models with FakeQuant ops (QAT): ``\"auto\"`` (integer when FakeQuants cover the graph), "
        "``\"int8\"`` or ``\"float\"`` (float emulation).", "--qat")
    qat_io: str = _opt(
        "float", "Integer QAT graphs: float inputs and outputs (QUANTIZE/DEQUANTIZE at the edges) or ``\"int8\"``.",
        "--qat-io")
    target: str | None = _opt(
        None, "Convert for a target (a :data:`tf2tosa.tosa.targets.TARGETS` name, e.g. ``\"vulkan-ml\"``): one "
        "without EXT-CONTROLFLOW gets its side-effect-free COND_IFs if-converted to SELECT; an Ethos-U target "
        "(``\"ethos-u85\"``, ``\"ethos-u55\"``) gets convolution dilations above 2 as dilation 2 or 1 of a wider "
        "kernel, int8 softmax row maxima as TRANSPOSE + MAX_POOL2D and int8 transposed convolutions as one CONV2D "
        "per output phase, and elementwise ops between a 1-D convolution network's RESHAPEs at the 4-D shape (and, "
        "for ethos-u85, the int8 softmax's 32-bit exp lookup as two i16 TABLEs and DEPTH_TO_SPACE / SPACE_TO_DEPTH "
        "as SLICE + CONCAT, without a TRANSPOSE), all exactly; "
        ":meth:`TosaModel.check_target` lists what it still cannot take.", "--target")
    npu_rounding: str = _opt(
        "exact", "Softmax on an NPU: ``\"exact\"`` (bit-exact with TFLite's reference kernels) or ``\"native\"``: "
        "an int8 softmax over rows under 512 elements takes its exp from one i16 TABLE of the top 16 bits and "
        "the reciprocal of the row sum from a second, interpolated one, which Vela runs far cheaper than TFLite's "
        "32-bit lookup and Newton-Raphson steps; each softmax output is within one "
        "LSB of TFLite's and the op is recorded as inexact (warned at conversion, listed by ``inspect`` and the "
        "verify report).  Other ops are unchanged.", "--npu-rounding")
    max_extract_mb: int | None = _opt(
        None, "Cap, in MiB, of what an NNEF ``.tgz``/``.tar`` or a Keras ``.keras`` zip may unpack, per member and "
        "in total (None: 2048).", "--max-extract-mb")
    trust_model: bool = _opt(
        False, "TensorFlow sources: load a SavedModel whose loading runs file-system, Python or queue ops, and let "
        ":meth:`TosaModel.verify` run such ops of its graph; without it both are refused.", "--trust-model")
    unsafe_deserialization: bool = _opt(
        False, "Load a ``.keras`` / ``.h5`` file outside Keras's safe mode, running the Python code it holds "
        "(``Lambda`` layers): only for files you trust.", "--unsafe-deserialization")
    custom_objects: Any = _opt(
        None, "Keras files: the custom layers and functions the file names, a mapping name -> class or the path of "
        "a Python module file (which is run), or a list of these.", "--custom-objects")
    tag: str | None = _opt(
        None, "SavedModels: the MetaGraph's tag set, e.g. ``\"serve,gpu\"``.", "--tag")
    inputs: Any = _opt(
        None, "TensorFlow sources: cut the graph at these tensors, which become the program's inputs "
        "(``NAME[:SHAPE[:DTYPE]]`` strings, or a mapping name -> shape).", "--inputs")
    outputs: Sequence[str] | None = _opt(
        None, "TensorFlow sources: convert only the ops the program's outputs, these tensors, need.", "--outputs")
    dynamic: bool = _opt(
        False, "Keep the unknown dimensions that ``dims`` and ``input_shapes`` leave open symbolic: a TOSA "
        "1.1-draft program (:func:`tf2tosa.convert_dynamic`).", "--dynamic")
    symbol: str | None = _opt(
        None, "With ``dynamic``: keep only this symbol symbolic (the others are fixed as without ``dynamic``).")
    hints: Mapping[str, int] | None = _opt(
        None, "With ``dynamic``: the sample size each symbol takes while converting (default: ``batch`` 3, others "
        "401, then 402 and 400); the program stays symbolic.", "--hint SYMBOL=VALUE")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The option names, in declaration order."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_keywords(cls, where: str = "convert", /, **keywords: Any) -> ConvertOptions:
        """The options given as keywords; an unknown name is a :class:`TypeError` naming the closest valid ones."""
        check_keywords(where, keywords, cls.names())
        return cls(**keywords)

    def replace(self, **changes: Any) -> ConvertOptions:
        """A copy with ``changes`` (checked as :meth:`from_keywords` checks them)."""
        check_keywords("ConvertOptions.replace", changes, self.names())
        return dataclasses.replace(self, **changes)


def check_keywords(where: str, keywords: Mapping[str, Any], valid: Sequence[str]) -> None:
    """A :class:`TypeError` for the first keyword not in ``valid``, naming the closest valid ones (difflib)."""
    for name in keywords:
        if name not in valid:
            close = difflib.get_close_matches(name, valid, n=3, cutoff=0.6)
            hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            raise TypeError(f"{where}() got an unexpected keyword argument {name!r}{hint}")


def documentation() -> str:
    """The Markdown list of every option (``docs/api-options.md``, written by ``tools/options_doc.py``)."""
    lines = ["# Conversion options", "",
             "<!-- generated by tools/options_doc.py from tf2tosa/options.py: edit the field metadata there -->", "",
             "`tf2tosa.convert(source, **options)` takes these keywords, one per field of "
             "`tf2tosa.options.ConvertOptions`; any other keyword is a `TypeError` naming the closest valid ones. "
             "The command line builds the same record from its flags.", "",
             "| option | default | flag | meaning |", "|---|---|---|---|"]
    for f in dataclasses.fields(ConvertOptions):
        cli = f.metadata.get("cli")
        doc = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", str(f.metadata["doc"])).replace("``", "`").replace("|", "\\|")
        lines.append(f"| `{f.name}` | `{f.default!r}` | {f'`{cli}`' if cli else '-'} | {doc} |")
    return "\n".join(lines) + "\n"


__all__ = ["MAX_UNROLL", "ConvertOptions", "check_keywords", "documentation"]
