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
TAXONOMY = REFERENCES / "taxonomy.yaml"
# Present only in a developer's or CI's checkout (the steering repo's shared/ beside it); never read at run time.
SHARED = ROOT.parent / "shared"


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
