"""torch, imported at its first use rather than with the package's modules.

A model whose network was dropped is the global GLM: loading and predicting
with it is numpy arithmetic (:mod:`autoglm_graph.estimators.predictor`, the families'
formulas on numpy arrays). The modules on that path write ``torch.exp(...)``
for their network and training code as everywhere else, but take ``torch``
from here: the name is bound to a :class:`LazyModule` that imports torch
(about a second) at the first attribute read, so a process that never reaches
such code never imports torch. Nothing is put in ``sys.modules`` before that
(``importlib.util.LazyLoader`` would put a half-made torch there, which
scikit-learn's array API checks and torch_geometric would find).
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import TYPE_CHECKING

__all__ = ["LazyModule", "torch"]


class LazyModule:
    """A module imported when one of its attributes is first read.

    Parameters
    ----------
    name : str
        The module's import name, e.g. ``"torch"``.

    Examples
    --------
    >>> json = LazyModule("json")
    >>> json.dumps([1])
    '[1]'
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attribute: str):
        # Reached only for names not set in __init__: the module's attributes
        # (and its own, on an object made without __init__, as copy does).
        if attribute in ("_name", "_module"):
            raise AttributeError(attribute)
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self._name)
        return getattr(module, attribute)

    def __repr__(self) -> str:
        state = "imported" if self._module is not None else "not imported yet"
        return f"<lazy module {self._name!r} ({state})>"


if TYPE_CHECKING:  # type checkers see torch itself
    import torch
else:
    torch = LazyModule("torch")


def lazy_exports(package: str, table: dict[str, str]):
    """``__getattr__`` and ``__dir__`` of an area's public face (PEP 562).

    ``table`` maps a public name to the module of ``package`` that defines
    it; the module is imported at the name's first use, so that importing an
    area's face costs nothing (a GLM-only model's load imports no network
    module, hence no torch).
    """

    def __getattr__(name: str):
        if name not in table:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(f"{package}.{table[name]}")
        value = getattr(module, name)
        sys.modules[package].__dict__[name] = value  # later look-ups skip this
        return value

    def __dir__() -> list[str]:
        return sorted({*sys.modules[package].__dict__, *table})

    return __getattr__, __dir__
