"""Lazy package exports: names resolved from their submodule on first access (PEP 562).

Keeps ``import replication.image`` / ``import replication.prompt`` cheap: UMAP, torch and
transformers load only when a name that needs them is used.
"""
from __future__ import annotations

import importlib


def lazy_getattr(package: str, exports: dict[str, str]):
    """A module ``__getattr__`` serving ``exports`` (name -> submodule of ``package``)."""

    def __getattr__(name):
        if name in exports:
            return getattr(importlib.import_module(f"{package}.{exports[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
