"""Where the project's data lives: references, profiles, schemas, patches, taxonomy."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCES = ROOT / "references"
PROFILES = ROOT / "profiles"
SCHEMAS = ROOT / "schemas"
PATCHES = ROOT / "patches"
SKILL = ROOT / "SKILL.md"


def taxonomy_path() -> Path | None:
    """The shared cause vocabulary: $DISTDOCTOR_TAXONOMY, else ../shared/taxonomy.yaml beside the repo."""
    env = os.environ.get("DISTDOCTOR_TAXONOMY")
    if env:
        return Path(env)
    candidate = ROOT.parent / "shared" / "taxonomy.yaml"
    return candidate if candidate.is_file() else None
