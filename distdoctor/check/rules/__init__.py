"""Registry of the checker's rules: every module of this package that defines RULE and check.

Modules are discovered with pkgutil, so adding a rule never means editing this file.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from types import ModuleType


@lru_cache(maxsize=None)
def _discover() -> tuple[ModuleType, ...]:
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "RULE") and hasattr(module, "check"):
            found.append(module)
    return tuple(sorted(found, key=lambda m: m.RULE.code))


def all_rules() -> list[ModuleType]:
    return list(_discover())


def codes() -> list[str]:
    return [m.RULE.code for m in _discover()]


def get(code: str) -> ModuleType:
    for module in _discover():
        if module.RULE.code == code:
            return module
    raise KeyError(f"unknown rule {code!r} (known: {', '.join(codes())})")
