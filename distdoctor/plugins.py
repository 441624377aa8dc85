"""Module discovery shared by the folders that hold one plugin per module (patches/, check/rules/)."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import Any, Callable, Iterable


def discover(package: str, path: Iterable[str], needs: tuple[str, ...],
             key: Callable[[ModuleType], Any]) -> tuple[ModuleType, ...]:
    """Every non-underscore module of `package` (found on `path`) that defines all of `needs`, sorted by `key`.
    A module that fails to import is named in an ImportError, never silently dropped."""
    found = []
    for info in pkgutil.iter_modules(path):
        if info.name.startswith("_"):
            continue
        try:
            module = importlib.import_module(f"{package}.{info.name}")
        except Exception as exc:
            raise ImportError(f"{package.replace('.', '/')}/{info.name}.py cannot be imported: "
                              f"{type(exc).__name__}: {exc}") from exc
        if all(hasattr(module, name) for name in needs):
            found.append(module)
    return tuple(sorted(found, key=key))
