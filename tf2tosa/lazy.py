"""A package's names loaded on first use: the module ``__getattr__`` (PEP 562) that :mod:`tf2tosa.quant` and
:mod:`tf2tosa.converter.passes` share, so a conversion holds the code of a helper or pass only once it reaches it."""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable
from typing import Any


def on_first_use(package: str, namespace: dict[str, Any], table: dict[str, tuple[str, str]]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package`` (whose ``globals()`` is ``namespace``) for the names of ``table``: name ->
    (submodule, attribute).  A name's first use imports its submodule and binds every name the table takes from it.

    A name shared with its module (the pass ``integer_io``, the helper ``rescale``) stays the function however the
    module is first imported: importing a submodule sets the package's attribute of its name to the module, which
    would hide the function from ``from package import name`` (the ``__getattr__`` is asked only for a name the
    package lacks).  So the package's module becomes a :class:`_LazyPackage` of ``table``, which binds the table's
    attribute of such a module instead."""

    def __getattr__(name: str) -> Any:
        spec = table.get(name)
        if spec is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(f"{package}.{spec[0]}")
        namespace.update({n: getattr(module, attr) for n, (mod, attr) in table.items() if mod == spec[0]})
        return namespace[name]

    owner = sys.modules.get(package)
    if owner is not None and type(owner) is types.ModuleType:
        owner.__class__ = _lazy_package(package, table)
    return __getattr__


def _lazy_package(package: str, table: dict[str, tuple[str, str]]) -> type[types.ModuleType]:
    """The module class of ``package``: setting an attribute of a table name to that name's own submodule (what
    the import system does after loading ``package.name``) binds the table's attribute of the module instead."""
    own = {name: f"{package}.{mod}" for name, (mod, _) in table.items()}

    class _LazyPackage(types.ModuleType):
        def __setattr__(self, name: str, value: Any) -> None:
            if isinstance(value, types.ModuleType) and own.get(name) == value.__name__:
                value = getattr(value, table[name][1])
            super().__setattr__(name, value)

    return _LazyPackage
