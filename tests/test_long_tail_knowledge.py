"""The long-tail entries (references/long-tail-runtime.md, fsdp-deepspeed.md) quote what torch 2.13 prints:
each program below fails (or warns) the way its entry says on a real 2-rank gloo run, and the diagnosis
names that entry's cause first."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from distdoctor.diagnose.engine import diagnose_text
from distdoctor.runner import (finished_despite_teardown_abort, run, run_torchrun, succeeded, torchrun_cmd,
                               with_open_files_limit)

HEAD = "import torch, torch.distributed as dist\ndist.init_process_group('gloo')\n"

# cause -> (program body after HEAD, the entry's quoted text that must appear in the output, fails?)
PROGRAMS = {
    "process_group_init_twice": ("dist.init_process_group('gloo')\n",
                                 "trying to initialize the default process group twice!", True),
    "model_differs_across_ranks": (
        """
        from torch.nn.parallel import DistributedDataParallel as DDP
        DDP(torch.nn.Linear(4, 4 + dist.get_rank()))
        """, "appears not to match sizes of the same param in process", True),
    "fsdp_mixed_dtype": (
        """
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        FSDP(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4).half()), device_id=torch.device("cpu"))
        """, "Must flatten tensors with uniform dtype but got torch.float32 and torch.float16", True),
    "reentrant_checkpoint_ddp": (
        """
        from torch.nn.parallel import DistributedDataParallel as DDP
        from torch.utils.checkpoint import checkpoint
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.l = torch.nn.Linear(4, 4)
            def forward(self, x):
                return checkpoint(self.l, checkpoint(self.l, x, use_reentrant=True), use_reentrant=True)
        model = DDP(M(), find_unused_parameters=True)
        model(torch.randn(2, 4, requires_grad=True)).sum().backward()
        """, "Expected to mark a variable ready only once", True),
    "syncbn_without_gpu_ddp": (
        """
        m = torch.nn.SyncBatchNorm.convert_sync_batchnorm(torch.nn.Sequential(torch.nn.BatchNorm1d(4)))
        m(torch.randn(8, 4))
        """, "SyncBatchNorm expected input tensor to be on GPU", True),
    "p2p_not_waited": (
        """
        import torch.distributed._functional_collectives as funcol
        funcol.all_reduce(torch.ones(4), "sum", dist.group.WORLD)
        """, "unwaited collective calls", False),
}


@pytest.mark.torchrun
@pytest.mark.parametrize("cause", sorted(PROGRAMS))
def test_long_tail_entry_matches_real_torch_output(cause: str, tmp_path: Path) -> None:
    body, quoted, fails = PROGRAMS[cause]
    script = tmp_path / f"{cause}.py"
    script.write_text(HEAD + textwrap.dedent(body), encoding="utf-8")
    res = run_torchrun(script, nproc=2, timeout=90)
    assert not res.timed_out, res.output[-2000:]
    failed = res.returncode != 0 and not finished_despite_teardown_abort(res)  # the abort comes after all work
    assert failed == fails, res.output[-2000:]
    assert quoted in res.output, res.output[-2000:]
    got = [c["id"] for c in diagnose_text(res.output)["causes"]]
    assert got and got[0] == cause, (got[:3], res.output[-1500:])


PREWORK_PROGRAM = Path(__file__).resolve().parent.parent / "evals" / "programs" / "fail_rank0_prework.py"
PREWORK_LOG = Path(__file__).resolve().parent / "data" / "logs" / "gen_prework_late_rank.log"
PREWORK_MARKS = ("Running tokenizer on", "Map:")


@pytest.mark.torchrun
def test_rank_start_skew_names_the_late_rank() -> None:
    """Rank 0 'tokenises' past the group timeout while ranks 1 and 2 wait in a barrier: the waiting ranks time out,
    the diagnosis names rank_start_skew (not a plain timeout) and rank 0 as the rank they waited for."""
    res = run_torchrun(PREWORK_PROGRAM, nproc=3, timeout=90)
    assert not res.timed_out and res.returncode != 0, res.output[-2000:]
    assert "Running tokenizer on train dataset" in res.output and "Timed out waiting 5000ms for" in res.output
    got = diagnose_text(res.output)
    assert [c["id"] for c in got["causes"]][0] == "rank_start_skew", (got["causes"][:3], res.output[-1500:])
    assert got["first_failure"]["rank"] == 0 and got["first_failure"]["missing_ranks"] == [0], got["first_failure"]
    kinds = {e["kind"] for e in got["causes"][0]["evidence"]}
    assert {"first failure", "hint"} <= kinds  # the timeout and the late rank's pre-work line


def test_rank_start_skew_needs_the_prework_lines() -> None:
    """The same real log without the late rank's pre-work lines is a timeout with no known reason: the cause
    is not claimed."""
    text = PREWORK_LOG.read_text(encoding="utf-8")
    assert diagnose_text(text)["causes"][0]["id"] == "rank_start_skew"
    bare = "\n".join(ln for ln in text.splitlines() if not ln.startswith(PREWORK_MARKS))
    assert "rank_start_skew" not in [c["id"] for c in diagnose_text(bare)["causes"]]


def test_rank_start_skew_not_after_many_collectives() -> None:
    """A map progress bar early in a log whose NCCL watchdog fires at SeqNum=808 (collective_timeout's quote from
    XPixelGroup/BasicSR#737): hundreds of collectives completed, so the ranks had met; no start skew."""
    prework = PREWORK_LOG.read_text(encoding="utf-8").splitlines()[1]
    watchdog = ("[rank1]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation "
                "timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, Timeout(ms)=600000) "
                "ran for 600020 milliseconds before timing out.")
    got = [c["id"] for c in diagnose_text(f"{prework}\n{watchdog}\n")["causes"]]
    assert "rank_start_skew" not in got and got[0] == "collective_timeout", got


FD_PROGRAM = Path(__file__).resolve().parent.parent / "evals" / "programs" / "fail_dataloader_fd_limit.py"
FD_MESSAGES = ("Too many open files. Communication with the workers is no longer possible",
               "received 0 items of ancdata")


def _run_under_fd_limit(*script_args: str):
    return run(with_open_files_limit(torchrun_cmd(FD_PROGRAM, 2, script_args), 128), timeout=90)


@pytest.mark.torchrun
def test_dataloader_fd_limit_names_the_cause() -> None:
    """Under `ulimit -n 128`, DataLoader workers (file_descriptor sharing) exhaust each rank's descriptors: torch
    says so in one of its two wordings, the diagnosis names dataloader_fd_limit from that line, and no rank went
    first (both ranks load alike). With the entry's fix, file_system sharing, the same run completes."""
    res = _run_under_fd_limit()
    assert not res.timed_out and res.returncode != 0, res.output[-2000:]
    assert any(m in res.output for m in FD_MESSAGES), res.output[-2000:]
    got = diagnose_text(res.output)
    assert got["causes"][0]["id"] == "dataloader_fd_limit", (got["causes"][:3], res.output[-1500:])
    assert got["causes"][0]["level"] == "signature"
    assert got["first_failure"]["rank"] is None, got["first_failure"]
    fixed = _run_under_fd_limit("--sharing", "file_system")
    assert not fixed.timed_out and succeeded(fixed), fixed.output[-2000:]


def test_dataloader_fd_limit_not_a_small_shm() -> None:
    """A worker's bus error (small /dev/shm, shm_too_small's quote) is not this cause, and a bare EMFILE outside
    DataLoader/multiprocessing frames is a candidate (a symptom: sockets or a leak hit the same limit), while one
    raised in multiprocessing's descriptor passing is a confident answer that counts far more."""
    bus = ("ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).\n"
           "RuntimeError: DataLoader worker (pid 325) is killed by signal: Bus error.\n")
    got = [c["id"] for c in diagnose_text(bus)["causes"]]
    assert got[0] == "shm_too_small" and "dataloader_fd_limit" not in got, got
    bare = 'Traceback (most recent call last):\n  File "serve.py", line 3, in <module>\nOSError: [Errno 24] Too many open files\n'
    frame = '  File "/usr/lib/python3.6/multiprocessing/resource_sharer.py", line 48, in __init__\n'
    answers = [diagnose_text(text) for text in (bare, bare.replace("OSError", frame + "OSError"))]
    assert [a["verdict"] for a in answers] == ["candidates", "confident"]
    fd = [next(c for c in a["causes"] if c["id"] == "dataloader_fd_limit") for a in answers]
    assert [c["level"] for c in fd] == ["symptom", "signature"] and fd[1]["score"] >= 2 * fd[0]["score"], fd


SPAWN_WORKER = "import torch.multiprocessing as mp\n\n\ndef worker(rank, fn):\n    print(f\"{rank} {fn(rank)}\", flush=True)  # one write: two ranks share the pipe\n\n\n"
SPAWN_MAINS = {  # how the function is defined -> spawn_unpicklable's quoted line for it
    "local": ("def main():\n    def scale(x):\n        return 2 * x\n    mp.spawn(worker, args=(scale,), nprocs=2)\n\n\n"
              "if __name__ == '__main__':\n    main()\n", "Can't pickle local object 'main.<locals>.scale'"),
    "under_main": ("if __name__ == '__main__':\n    def scale(x):\n        return 2 * x\n"
                   "    mp.spawn(worker, args=(scale,), nprocs=2)\n", "Can't get attribute 'scale' on <module '__mp_main__'"),
    "module": ("def scale(x):\n    return 2 * x\n\n\nif __name__ == '__main__':\n"
               "    mp.spawn(worker, args=(scale,), nprocs=2)\n", None),
}


@pytest.mark.parametrize("how", sorted(SPAWN_MAINS))
def test_spawn_unpicklable_on_a_real_spawn(how: str, tmp_path: Path) -> None:
    """torch.multiprocessing.spawn with a function defined inside main() or under `if __name__ == "__main__":`
    fails before any worker runs, as spawn_unpicklable quotes, and the diagnosis names it first; the entry's fix
    (a module-level function) starts both workers."""
    main, quoted = SPAWN_MAINS[how]
    script = tmp_path / f"spawn_{how}.py"
    script.write_text(SPAWN_WORKER + main, encoding="utf-8")
    res = run([sys.executable, str(script)], timeout=240, cwd=tmp_path)  # two fresh interpreters import torch
    assert not res.timed_out, res.output[-2000:]
    if quoted is None:
        assert res.returncode == 0 and "0 0" in res.output and "1 2" in res.output, (res.returncode, res.output[-2000:])
        return
    assert res.returncode != 0 and quoted in res.output, res.output[-2000:]
    got = [c["id"] for c in diagnose_text(res.output)["causes"]]
    assert got and got[0] == "spawn_unpicklable", (got[:3], res.output[-1500:])


CORPUS = Path(__file__).resolve().parent.parent / "evals" / "corpus"


@pytest.mark.parametrize("case", ["swift-readthedocs-faq-training-q13", "deepspeedai-deepspeed-6525", "openbmb-minicpm-v-694"])
def test_deepspeed_config_validation_is_a_version_mismatch(case: str) -> None:
    """DeepSpeed 0.15's pydantic config rejects the float ZeRO-3 bucket size that a trainer's 'auto' computes (train
    corpus cases, printed by three different trainers): a signature of framework_version_mismatch, not the ZeRO-3
    words around it."""
    got = diagnose_text((CORPUS / f"{case}.log").read_text(encoding="utf-8"))["causes"]
    assert got[0]["id"] == "framework_version_mismatch" and got[0]["level"] == "signature", got[:2]


@pytest.mark.parametrize("case", ["iml-dkfz-fd-shifts-3", "lightning-ai-pytorch-lightning-6893"])
def test_spawn_unpicklable_from_lightning_threads(case: str) -> None:
    """The pickle messages Lightning's spawn strategy surfaces (train corpus cases: a partial class, a wrapped
    training_step) are spawn_unpicklable signatures; a context that merely mentions mp.spawn is not."""
    got = diagnose_text((CORPUS / f"{case}.log").read_text(encoding="utf-8"))["causes"]
    assert got[0]["id"] == "spawn_unpicklable" and got[0]["level"] == "signature", got[:2]
    words = diagnose_text("dist.scatter gives wrong results for transposed tensors",
                          context="2-process mp.spawn demo, NCCL")["causes"]
    assert "spawn_unpicklable" not in [c["id"] for c in words], words[:3]


def test_accelerate_debug_shape_check_is_a_shape_mismatch() -> None:
    """accelerate's debug mode names each process's shape before the collective (train corpus case quoting the
    accelerate docs): a collective_shape_mismatch signature, without retrieval's help."""
    text = (CORPUS / "huggingface-docs-accelerate-debug.log").read_text(encoding="utf-8")
    got = diagnose_text(text)["causes"]
    assert got[0]["id"] == "collective_shape_mismatch" and got[0]["level"] == "signature", got[:2]
    line = next(ln for ln in text.splitlines() if "Cannot apply desired operation" in ln)
    alone = diagnose_text(line + "\n")["causes"]
    assert alone[0]["id"] == "collective_shape_mismatch" and alone[0]["level"] == "signature", alone[:2]


@pytest.mark.parametrize("case, cause", [
    ("meta-llama-llama-cookbook-675", "fsdp_mixed_dtype"),           # FSDP over 4-bit (integer) weights
    ("ssj9596-one-to-all-animation-12", "zero3_partitioned_params"),  # embedding of a ZeRO-3 partition
    ("nvlabs-funit-23", "ddp_buffer_broadcast_inplace"),              # the version line wrapped onto its own line
    ("huggingface-trl-722", "local_rank_device"),                     # 8-bit model on GPU 0 in every rank
    ("lrzjason-t2itrainer-56", "local_rank_device"),
    ("lin-shang-instructerc-16", "deepspeed_batch_config"),            # a derived batch setting of 0
    ("hrnet-hrnet-semantic-segmentation-183", "syncbn_without_gpu_ddp"),  # older torch's outside-DDP refusal
    ("xpixelgroup-basicsr-278", "ddp_buffer_broadcast_inplace"),       # anomaly mode's BatchNorm backward
])
def test_framework_messages_are_signatures(case: str, cause: str) -> None:
    """Library messages of the training frameworks (train corpus cases) are answered by a signature, not only by
    retrieval of a similar log: the case's own log is left out of retrieval as the eval does."""
    from distdoctor.diagnose.retrieval import excluding

    with excluding({f"corpus:{case}"}):
        got = diagnose_text((CORPUS / f"{case}.log").read_text(encoding="utf-8"))["causes"]
    assert got[0]["id"] == cause and got[0]["level"] == "signature", got[:2]


def test_8bit_on_multiple_devices_is_not_a_rank_device() -> None:
    """accelerate's other 8-bit message (a model spread over several GPUs, a release bug fixed in accelerate) does not
    carry the per-rank device signature."""
    text = "ValueError: You can't train a model that has been loaded in 8-bit precision on multiple devices.\n"
    got = diagnose_text(text)["causes"]
    assert not got or got[0]["id"] != "local_rank_device" or got[0]["level"] != "signature", got[:2]
