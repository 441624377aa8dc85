"""Registry of the checker's rules: every module of this package that defines RULE and check.

Modules are discovered with pkgutil, so adding a rule never means editing this file.
"""

from __future__ import annotations

from functools import lru_cache
from types import ModuleType

from distdoctor.plugins import discover


@lru_cache(maxsize=None)
def _discover() -> tuple[ModuleType, ...]:
    return discover(__name__, __path__, ("RULE", "check"), key=lambda m: m.RULE.code)


def all_rules() -> list[ModuleType]:
    return list(_discover())


def codes() -> list[str]:
    return [m.RULE.code for m in _discover()]


def get(code: str) -> ModuleType:
    for module in _discover():
        if module.RULE.code == code:
            return module
    raise KeyError(f"unknown rule {code!r} (known: {', '.join(codes())})")
