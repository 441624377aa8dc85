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

CAUSE_KNOWN = {
    "gen_monitored_barrier": "monitoredBarrier / Timed out are rank_conditional_collective hints that outweigh collective_timeout's root",
    "netns_no_ifname_hung_node": "a hang with stack dumps only; no rendezvous_unreachable signature or keyword matches",
    "gen_uneven_batches": "the log proves a collective mismatch (rank_conditional_collective root); nothing names "
                          "uneven data: relabel proposed, needs tests/data/make_logs.py's cause changed too",
    "gen_uneven_batches_4ranks": "only gloo timeouts, rank 0 in DDP forward vs the others in all_reduce; nothing names "
                                 "uneven data: relabel proposed, needs tests/data/make_logs.py's cause changed too",
    "public_download_race_automodel": "quoted traceback is cut before its exception line; only checkpoint frames remain",
    "repo_nanochat": "silent run (exit 0): no signature; the context matches no single_process_launch keyword",
    "slurm_no_rank_mapping": "'environment variable RANK expected, but not set' is a single_process_launch root; "
                             "slurm_launch has no keyword for the context",
}
RANK_KNOWN = {
    "public_download_race_automodel": "the quoted traceback has no exception line",
}


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
