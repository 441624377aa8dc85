"""Where the project's data lives: references, profiles, schemas, patches, taxonomy, SKILL.md.

One lookup for both ways distdoctor runs: from a checkout or skill folder (the data beside the
`distdoctor/` package: `SKILL.md`, `references/`, `patches/`, ...), or installed from a wheel, where
the build maps the same folders into the package (`distdoctor/SKILL.md`, `distdoctor/references/`,
`distdoctor/patches/` as the package `distdoctor.patches`; see setup.py). The bundled copy wins
when present, so an installed distdoctor never reads a stray folder beside site-packages.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

PACKAGE = Path(__file__).resolve().parent
BUNDLED = (PACKAGE / "SKILL.md").is_file()
ROOT = PACKAGE if BUNDLED else PACKAGE.parent
REFERENCES = ROOT / "references"
PROFILES = ROOT / "profiles"
SCHEMAS = ROOT / "schemas"
PATCHES = ROOT / "patches"
SKILL = ROOT / "SKILL.md"
TAXONOMY = REFERENCES / "taxonomy.yaml"
# Present only in a developer's or CI's checkout (the steering repo's shared/ beside it); never read at run time.
SHARED = PACKAGE.parent.parent / "shared"
PATCH_PACKAGE = "distdoctor.patches"


def patch_registry() -> ModuleType:
    """The patch registry, always imported as `distdoctor.patches` (its modules: `distdoctor.patches.<id>`).

    Installed, it is a real subpackage. In a checkout it is the top-level `patches/` folder, loaded
    under the same name, so `import distdoctor.patches.<id>` works after this call in both.
    """
    loaded = sys.modules.get(PATCH_PACKAGE)
    if loaded is not None:
        return loaded
    if BUNDLED:
        return importlib.import_module(PATCH_PACKAGE)
    spec = importlib.util.spec_from_file_location(PATCH_PACKAGE, PATCHES / "__init__.py",
                                                  submodule_search_locations=[str(PATCHES)])
    if spec is None or spec.loader is None:
        raise ImportError(f"{PATCHES}: no patch registry (patches/__init__.py is missing)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[PATCH_PACKAGE] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[PATCH_PACKAGE]
        raise
    import distdoctor

    distdoctor.patches = module  # type: ignore[attr-defined]
    return module


def patch_module(name: str) -> ModuleType:
    """One module of the registry by file name (`sdpa_force`), as `distdoctor.patches.<name>`."""
    patch_registry()
    return importlib.import_module(f"{PATCH_PACKAGE}.{name}")


def taxonomy_path() -> Path | None:
    """The project's cause vocabulary: $DISTDOCTOR_TAXONOMY, else references/taxonomy.yaml."""
    env = os.environ.get("DISTDOCTOR_TAXONOMY")
    if env:
        return Path(env)
    return TAXONOMY if TAXONOMY.is_file() else None


def field_reports_dir() -> Path | None:
    """The field reports (shared/field-reports beside the checkout), or None where they are absent."""
    candidate = SHARED / "field-reports"
    return candidate if candidate.is_dir() else None


def seed_taxonomy_path() -> Path | None:
    """The seed vocabulary (shared/taxonomy.yaml beside the checkout), or None where it is absent."""
    candidate = SHARED / "taxonomy.yaml"
    return candidate if candidate.is_file() else None
