"""Every real log of tests/data/logs: the top cause is the expected one, and so is the first failing rank.

Logs whose label the log itself cannot support, or that need a knowledge-base change, are listed
below with the reason (reported to the owners of references/ and of the corpus). They run as
non-strict xfail, so a fix elsewhere shows up as XPASS without breaking the suite.
"""

from functools import lru_cache
from pathlib import Path

import pytest
import yaml

from distdoctor.diagnose import diagnose_paths

LOGS = Path(__file__).resolve().parent / "data" / "logs"
METAS = sorted(LOGS.glob("*.meta.yaml"))

# Logs whose top cause or first failing rank is known to be wrong (name -> reason). A log added here needs its
# reason, and shows up as XPASS once fixed.
CAUSE_KNOWN: dict[str, str] = {
    "gen_store_wait_own_key": "a store key the program sets itself does not say why nobody set it (the setter "
                              "skipped it here; it may as well have failed or be late): candidates, by design",
    "gen_store_wait_world_oversized": "a wait for rank 2's address cannot tell a world_size larger than the job "
                                      "from a rank 2 on another node that is late: the oversized world is a "
                                      "candidate (test_diagnose_calibration); the hang doctor reads the argument",
}
RANK_KNOWN: dict[str, str] = {}


@lru_cache(maxsize=None)
def _diagnose(meta: Path) -> tuple[dict, dict]:
    info = yaml.safe_load(meta.read_text(encoding="utf-8"))
    base = meta.with_name(meta.name[:-len(".meta.yaml")])
    paths = [str(base) + ".log"]
    folder = Path(str(base) + ".d")
    if folder.is_dir():
        paths.append(str(folder))
    return info, diagnose_paths(paths, info.get("context"))


def _cases(known: dict) -> list:
    out = []
    for meta in METAS:
        name = meta.name[:-len(".meta.yaml")]
        marks = [pytest.mark.xfail(reason=known[name], strict=False)] if name in known else []
        out.append(pytest.param(meta, id=name, marks=marks))
    return out


def test_corpus_is_there():
    assert len(METAS) >= 20


@pytest.mark.parametrize("meta", _cases(CAUSE_KNOWN))
def test_top_cause(meta: Path):
    info, result = _diagnose(meta)
    got = [c["id"] for c in result["causes"]]
    assert got and got[0] == info["expected_cause"], f"top causes {got[:3]}"


@pytest.mark.parametrize("meta", _cases(RANK_KNOWN))
def test_first_failure_rank(meta: Path):
    info, result = _diagnose(meta)
    ff = result["first_failure"]
    assert (ff["rank"] if ff else None) == info.get("first_failure_rank"), f"first failure {ff}"
