"""The ``--dynamic`` driver (:func:`tf2tosa.convert_dynamic`): which dimensions stay symbolic, the conversions at
sample sizes, and the symbolic program :func:`.dynamic.symbolise` makes of two of them.

The model is converted once with each open dimension a :class:`~tf2tosa.ir.symdim.SymDim` whose sample size is the
hint (``--hint``) or the stated default (:data:`.dynamic.DEFAULT_HINTS`), so the lowerings' own shape arithmetic
yields every dimension's expression; a second conversion at other sample sizes (leaving a remainder in the divisions
the sizes go through: :func:`.dynamic.check_hints`) checks that nothing depended on the samples.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from ..errors import ConversionError, InputError, NotYetError
from ..ir.records import ConversionRecord
from ..ir.symdim import Guards
from ..options import ConvertOptions
from . import dynamic
from .frontends import Converted, convert_source

#: set while a look-up conversion runs whose warnings (defaulted dimensions …) are not the user's to see
_MUTED: contextvars.ContextVar[bool] = contextvars.ContextVar("tf2tosa_defaults_muted", default=False)


class _MuteFilter(logging.Filter):
    """Drops the ``tf2tosa`` logger's records below ERROR inside :func:`_defaults_muted` (this thread only)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or not _MUTED.get()


@contextlib.contextmanager
def _defaults_muted() -> Iterator[None]:
    """Keep the warnings of a look-up conversion (whose defaults are not the user's) off the ``tf2tosa`` logger,
    in this context only: the logger's level and other threads' conversions are left alone."""
    log = logging.getLogger("tf2tosa")
    if not any(isinstance(f, _MuteFilter) for f in log.filters):
        log.addFilter(_MuteFilter())
    token = _MUTED.set(True)
    try:
        yield
    finally:
        _MUTED.reset(token)


class _SizeIndependent(Exception):
    """Carries a conversion's "not yet" error that other sample sizes would not change."""

    def __init__(self, error: ConversionError) -> None:
        super().__init__(str(error))
        self.error = error


def open_symbols(source: Any, options: ConvertOptions) -> list[str]:
    """The dimension symbols neither ``options.dims`` (``--dim``) nor an ``input_shapes`` entry sets.  A TensorFlow
    or NNEF model is converted to find them, with the open dimensions at their defaults, or at ``options.hints``
    (``--hint``) when the defaults make it invalid (a window longer than a length of 1)."""
    from .frontends import frontend_of, map_source
    from .passes.input_shapes import dimension_symbols, resolve_input_shapes
    from .tflite import load_tflite

    fixed = dict(options.dims or {})
    hints = options.hints
    plain = options.replace(dynamic=False, symbol=None, hints=None)
    shaped = set(options.input_shapes or {})
    if frontend_of(source).name in ("nnef", "tensorflow"):
        hinted: set[str] = set()
        with _defaults_muted():  # the defaults of this look-up conversion are not the user's
            try:
                first = convert_source(source, plain)
            except ConversionError:
                if not hints:
                    raise
                hinted = set(hints) - set(fixed)
                first = convert_source(source, plain.replace(dims={**fixed, **{s: int(hints[s]) for s in hinted}}))
        return sorted({d["symbol"] for e in first.graph.record.fixed_dims for d in e["dims"]
                       if d["from"] == "default" or (d["from"] == "dim" and d["symbol"] in hinted)})
    data, path = map_source(source)
    graph = load_tflite(data, file=path)
    syms = dimension_symbols(graph)
    # the sizes given are checked as the static conversion checks them (wrong rank, size < 1, an input or symbol
    # the model lacks, a symbol bound to two values: one InputError) before the open symbols are counted
    with _defaults_muted():  # the defaults of this check are not the user's (open dimensions stay symbolic)
        resolve_input_shapes(graph, options.input_shapes, file=path, dims=fixed)
    return sorted({s for v in graph.inputs if v.name in syms and v.name not in shaped and v.source not in shaped
                   for s in syms[v.name] if s and s not in fixed})


def _chosen_symbols(source: Any, options: ConvertOptions, label: str | None) -> list[str]:
    """The symbols kept symbolic: the open ones, or ``options.symbol`` alone; checked, with the hints."""
    fixed = dict(options.dims or {})
    symbol = options.symbol
    open_syms = open_symbols(source, options)
    if symbol is not None:
        if symbol in fixed:
            raise InputError(f"--dynamic: {symbol} is both kept symbolic and fixed by --dim", file=label,
                             tensor=symbol)
        if symbol not in open_syms:
            raise InputError(f"--dynamic: the model has no open unknown dimension named {symbol!r} "
                             f"(open: {', '.join(open_syms) or 'none'})", file=label, tensor=symbol)
        open_syms = [symbol]
    if not open_syms:
        raise InputError("--dynamic: the model has no unknown dimension left symbolic (--input-shape and --dim fix "
                         "every one; leave the dimensions to keep symbolic unset, or convert without --dynamic)",
                         file=label)
    for s, h in dict(options.hints or {}).items():
        if s not in open_syms:
            raise InputError(f"--hint {s}={h}: no open unknown dimension named {s!r} (open: {', '.join(open_syms)})",
                             file=label, tensor=s)
        if int(h) < 1:
            raise InputError(f"--hint {s}={h}: a dimension size must be at least 1", file=label, tensor=s)
    return open_syms


#: one conversion at sample sizes: the converted model and the size guards it recorded
_Run = Callable[[Mapping[str, int]], tuple[Converted, Guards]]


def _sample_run(source: Any, options: ConvertOptions, open_syms: Sequence[str], label: str | None) -> _Run:
    """The conversion at sample sizes ``env`` (symbol -> size), each open dimension a SymDim: its "not yet" errors
    that other sizes would not change come as :class:`_SizeIndependent`, others name the samples."""
    from ..ir.symdim import guards as guard_context
    from ..ir.symdim import symbol as sym_size

    fixed = dict(options.dims or {})
    plain = options.replace(dynamic=False, symbol=None, hints=None)

    def run(env: Mapping[str, int]) -> tuple[Converted, Guards]:
        with guard_context() as g:
            try:
                m = convert_source(source, plain.replace(dims={**fixed, **{s: sym_size(s, env[s])
                                                                           for s in open_syms}}))
            except InputError:
                raise
            except NotYetError as e:  # a lowering that knows it cannot keep a size symbolic: other samples would
                reasons = getattr(e, "reasons", None)  # not help
                if isinstance(reasons, dict) and len(reasons) == 1:  # one op kind: its own line, naming it
                    (name, (_, why)), = reasons.items()
                    e = NotYetError(why, file=e.file or label, op=name)
                raise _SizeIndependent(e) from None
            except ConversionError as e:
                at = ", ".join(f"{s}={env[s]}" for s in open_syms)
                raise NotYetError(f"--dynamic: not yet: the model does not convert at the sample sizes {at} "
                                  f"(set other samples with --hint SYMBOL=VALUE): {e.message}",
                                  file=e.file or label, op=e.op, tensor=e.tensor) from None
        return m, g

    return run


def _first_conversion(run: _Run, tries: Sequence[Mapping[str, int]], open_syms: Sequence[str],
                      given: Mapping[str, int]) -> tuple[Converted, Guards, Mapping[str, int]]:
    """The first of ``tries`` at which the model converts, its guards and those sample sizes."""
    for k, samples in enumerate(tries):
        try:
            first, g1 = run(samples)
            return first, g1, samples
        except InputError:
            raise
        except _SizeIndependent as e:
            raise e.error from None
        except ConversionError:
            if k == len(tries) - 1 or all(s in given for s in open_syms):
                raise
    raise AssertionError("no sample sizes tried")  # (tries is never empty)


def _stuck(run: _Run, first: Converted, g1: Guards, samples: Mapping[str, int], label: str | None) -> NotYetError:
    """The error when no other sample sizes keep the guards of the first conversion: typically a size equated with
    a sample value (a lost symbol); the comparison with a conversion at other sizes names the op where it happened
    (raised from :func:`.dynamic.symbolise`)."""
    stuck = NotYetError(f"--dynamic: not yet: the conversion at {samples} relied on "
                        f"{'; '.join(g1.relations)}, and no other sample sizes keep that true", file=label)
    for off in dynamic.CHECK_OFFSETS:  # the first other sizes the model converts at (one a parity keeps, say)
        env_o = {s: h + off * (2 * k + 1) for k, (s, h) in enumerate(sorted(samples.items()))}
        try:
            second, _ = run(env_o)
        except (ConversionError, _SizeIndependent):
            continue
        dynamic.symbolise(first.graph, second.graph, samples, env_o, g1, file=label)
        break
    return stuck


def _open_fixed_dims(record: ConversionRecord, open_syms: Sequence[str]) -> None:
    """``record.fixed_dims`` without the dimensions kept symbolic (their shapes name the symbol instead)."""
    kept = []
    for entry in record.fixed_dims:
        shape = [next((d["symbol"] for d in entry["dims"] if d["dim"] == k and d["symbol"] in open_syms), int(n))
                 for k, n in enumerate(entry["shape"])]
        dims_left = [{**d, "value": int(d["value"])} for d in entry["dims"] if d["symbol"] not in open_syms]
        if dims_left:
            kept.append({**entry, "shape": shape, "dims": dims_left})
    record.fixed_dims = kept


def convert_dynamic(source: Any, options: ConvertOptions) -> Converted:
    """One symbolic TOSA 1.1-draft program of ``source`` (see the module docstring and
    :func:`tf2tosa.convert_dynamic`); what cannot be expressed yet is one :class:`NotYetError`."""
    from ..tosa.profiles import requirements

    label = os.fspath(source) if isinstance(source, (str, os.PathLike)) else None
    open_syms = _chosen_symbols(source, options, label)
    given = dict(options.hints or {})
    defaults = dynamic.DEFAULT_HINTS
    tries = [{s: int(given[s]) if s in given else defaults.get(s, defaults[""])[k] for s in open_syms}
             for k in range(len(defaults[""]))]
    run = _sample_run(source, options, open_syms, label)
    first, g1, samples = _first_conversion(run, tries, open_syms, given)
    # check sizes that leave remainders in the divisions the sizes go through
    env2 = dynamic.check_hints(g1, samples, dynamic.divisions(first.graph, g1))
    if env2 is None:
        raise _stuck(run, first, g1, samples, label)
    try:
        second, g2 = run(env2)
    except _SizeIndependent as e:
        raise e.error from None
    if g2.relations != g1.relations:
        raise NotYetError(f"--dynamic: not yet: the conversions at {samples} and {env2} relied on different "
                          f"size conditions ({'; '.join(g1.relations)} / {'; '.join(g2.relations)})", file=label)
    graph = dynamic.symbolise(first.graph, second.graph, samples, env2, g1, file=label)
    _open_fixed_dims(graph.record, open_syms)
    profs, exts = requirements(graph)
    graph.record.profiles, graph.record.extensions = profs, sorted(set(exts) | {"EXT-DYNAMIC", "EXT-SHAPE"})
    return Converted(graph, source=first.source, source_path=first.source_path)


__all__ = ["convert_dynamic", "open_symbols"]
