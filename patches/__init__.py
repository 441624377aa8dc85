"""Registry of the patches: every module of this package that defines PATCH and Transformer.

Modules are discovered with pkgutil, so adding a patch never means editing this file.
"""

from __future__ import annotations

from functools import lru_cache
from types import ModuleType

from distdoctor.plugins import discover


@lru_cache(maxsize=None)
def _discover() -> tuple[ModuleType, ...]:
    return discover(__name__, __path__, ("PATCH", "Transformer"), key=lambda m: m.PATCH.id)


def all_patches() -> list[ModuleType]:
    """Every patch module, sorted by PATCH.id (the order the engine applies them in)."""
    return list(_discover())


def ids() -> list[str]:
    return [m.PATCH.id for m in _discover()]


def get(patch_id: str) -> ModuleType:
    """The patch module whose PATCH.id is patch_id; KeyError naming the known ids otherwise."""
    for module in _discover():
        if module.PATCH.id == patch_id:
            return module
    raise KeyError(f"unknown patch {patch_id!r} (known: {', '.join(ids())})")


def for_cause(cause: str) -> list[ModuleType]:
    """The patch for a cause: every module whose PATCH.cause is that cause, in registry order."""
    return [m for m in _discover() if m.PATCH.cause == cause]
