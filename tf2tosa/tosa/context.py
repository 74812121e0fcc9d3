"""What a legalization rule may read about the conversion it is part of.

One :class:`LegalizeContext` per conversion rides on every :class:`~tf2tosa.tosa.builder.Builder` the
legalization driver makes (``b.context``); rules, the control-flow inliner and the quantization helpers read
options from it instead of undeclared builder attributes.  A builder made without one gets the defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..ir.pass_context import PassContext
from ..options import MAX_UNROLL, ConvertOptions

if TYPE_CHECKING:
    from .targets import Target


@dataclass
class LegalizeContext:
    """Options of one conversion, as the legalization rules see them, and the failures gathered so far."""

    #: fold ops with constant operands at conversion time
    fold: bool = True
    #: requantization rounding: "double" (TFLite-exact, EXT-DOUBLEROUND) or "single" (PRO-INT core)
    rounding: str = "double"
    #: ops without a lowering become TOSA CUSTOM operators instead of failing (``--custom-ops``)
    custom_ops: bool = False
    #: WHILE loops with a static trip count up to this are unrolled (0: never)
    max_unroll: int = MAX_UNROLL
    #: every option of the conversion (:class:`tf2tosa.options.ConvertOptions`)
    options: ConvertOptions = field(default_factory=ConvertOptions)
    #: the model file, for error messages
    file: str | None = None
    #: op name -> reasons of the ops that could not be legalized
    failures: dict[str, list[str]] = field(default_factory=dict)
    #: what the passes and rules hand each other about each graph (:class:`~tf2tosa.ir.pass_context.GraphPasses`)
    passes: PassContext = field(default_factory=PassContext)

    def target(self) -> Target | None:
        """The conversion's ``--target`` (:data:`tf2tosa.tosa.targets.TARGETS`), or None; the target table is
        loaded only when a target is given."""
        if not self.options.target:
            return None
        from .targets import TARGETS

        return TARGETS.get(self.options.target)

    def fail(self, name: str, reason: str) -> None:
        """Record that an op ``name`` could not be legalized, and why."""
        self.failures.setdefault(name, []).append(reason)


__all__ = ["MAX_UNROLL", "LegalizeContext"]
