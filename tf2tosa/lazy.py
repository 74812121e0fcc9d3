"""A package's names loaded on first use: the module ``__getattr__`` (PEP 562) that :mod:`tf2tosa.quant` and
:mod:`tf2tosa.converter.passes` share, so a conversion holds the code of a helper or pass only once it reaches it."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def on_first_use(package: str, namespace: dict[str, Any], table: dict[str, tuple[str, str]]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package`` (whose ``globals()`` is ``namespace``) for the names of ``table``: name ->
    (submodule, attribute).  A name's first use imports its submodule and binds every name the table takes from it:
    the import set the package's attribute of the submodule's own name to the module, and a name shared with its
    module (the pass ``integer_io``, the helper ``rescale``) must be the function again."""

    def __getattr__(name: str) -> Any:
        spec = table.get(name)
        if spec is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(f"{package}.{spec[0]}")
        namespace.update({n: getattr(module, attr) for n, (mod, attr) in table.items() if mod == spec[0]})
        return namespace[name]

    return __getattr__
