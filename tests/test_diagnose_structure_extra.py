"""Structure the engine reads beyond signatures: version facts (a driver older than the build's CUDA) and
the rank prefixes that threads and launchers put in front of torch's lines."""

from distdoctor.diagnose import diagnose_text
from distdoctor.diagnose.prefixes import split_prefix
from distdoctor.diagnose.versions import VersionFacts

# Quoted from https://github.com/NVIDIA/nccl/issues/955 (NCCL_DEBUG=INFO inside a pod whose driver is CUDA 11.0)
NCCL_955 = (
    "dl-1509126880-pod-jupyter-m2gss:205826:205826 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), "
    "using internal implementation\n"
    "dl-1509126880-pod-jupyter-m2gss:205826:205826 [0] NCCL INFO cudaDriverVersion 11000\n"
    "NCCL version 2.14.3+cuda11.7\n"
)


def test_driver_older_than_build_is_structural_evidence():
    r = diagnose_text(NCCL_955)
    top = r["causes"][0]
    assert top["id"] == "cuda_driver_too_old" and top["level"] == "structural"
    assert "CUDA 11.0" in top["evidence"][0]["proves"] and "11.7" in top["evidence"][0]["proves"]


def test_driver_new_enough_is_no_evidence():
    """The parser alone, on version values (not log quotes): the lowest driver and the highest build win."""
    facts = VersionFacts()
    where = {"file": "x.log", "line": 1, "rank": None}
    facts.read("cudaDriverVersion 12020", where)
    facts.read("NCCL version 2.18.1+cuda12.1", {**where, "line": 2})
    facts.read("torch 2.1.0+cu118", {**where, "line": 3})
    assert facts.driver[0] == (12, 2) and facts.build[0] == (12, 1)
    assert facts.too_old() == []
    facts.read("CUDA Version: 11.4", {**where, "line": 4})  # nvidia-smi's banner field
    assert facts.driver[0] == (11, 4) and [e["line"] for e in facts.too_old()] == [4, 2]


def test_thread_and_launcher_prefixes_name_the_rank():
    # https://github.com/aws-samples/aws-do-eks/issues/50: "[rank8]" quoted without torch's colon
    assert split_prefix("[rank8] Gloo connectFullMesh failed ... timed out connecting")[0] == 8
    # https://github.com/zunxbt/gensyn-testnet/issues/10: a markdown quote and heading mark before the prefix
    rank, ts, body = split_prefix("> #[rank0]:[W403 11:42:02.380967152 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group "
                                     "has NOT been destroyed before we destruct ProcessGroupNCCL.")
    assert rank == 0 and body.startswith("[W403")
    # https://github.com/meta-pytorch/torchx/issues/540: Ray's worker prefix names a process, not a rank
    assert split_prefix('(CommandActor pid=552, ip=10.130.6.168)     raise') == (None, None, "    raise")


def test_spawn_names_the_failing_process():
    # https://github.com/Lightning-AI/pytorch-lightning/issues/981 (torch.multiprocessing.spawn's parent)
    log = ("-- Process 0 terminated with the following error:\n"
           "Traceback (most recent call last):\n"
           '  File "/home/rmrao/anaconda3/lib/python3.6/site-packages/torch/multiprocessing/spawn.py", line 19, in _wrap\n'
           "    fn(i, *args)\n"
           "AttributeError: 'NoneType' object has no attribute 'config'\n")
    assert diagnose_text(log)["first_failure"]["rank"] == 0


def test_one_process_on_two_gpus_points_at_foreign_allocation():
    # nvidia-smi's process rows quoted from
    # https://discuss.pytorch.org/t/train-with-nn-distributeddataparallel-gpu0-will-occupy-much-more-memory-memory/66080
    rows = ("|    2      8538      C   /usr/bin/python3                            8025MiB |\n"
            "**|    2      8539      C   /usr/bin/python3                            1369MiB |**\n"
            "|    3      8539      C   /usr/bin/python3                            8037MiB |\n")
    r = diagnose_text(rows)
    ids = [c["id"] for c in r["causes"]]
    assert ids[:2] == ["torch_load_no_map_location", "local_rank_device"]
    assert r["causes"][0]["level"] == "structural" and "GPUs 2, 3" in r["causes"][0]["evidence"][0]["proves"]
    # one process per GPU is a healthy job: no such evidence
    assert all(c["level"] != "structural" for c in diagnose_text(rows.splitlines()[0] + "\n")["causes"])


def test_several_small_processes_of_one_program_on_one_gpu_whatever_its_name():
    """A packaged trainer (not a `python` process) still reads as the job's own when it is listed on a GPU
    several times: rows quoted from https://github.com/pytorch/pytorch/issues/49481 (every local rank holds
    ~870 MiB on GPU 0 beside rank 0's memory); a lone row of another program is not the job's."""
    rows = "".join(f"|    0   N/A  N/A   {pid}      C   [xarexec] ./dlrm_hack2.par        {mib}MiB |\n"
                   for pid, mib in ((2695172, 26167), (2695173, 871), (2695174, 871), (2695178, 871)))
    r = diagnose_text(rows)
    assert r["causes"][0]["id"] == "torch_load_no_map_location" and r["causes"][0]["level"] == "structural"
    assert "4 processes hold memory on GPU 0" in r["causes"][0]["evidence"][0]["proves"]
    # one program on two GPUs, rows quoted from https://github.com/XuehaiPan/nvitop/issues/152
    other = ("|    0   N/A  N/A     10734      C   ...-x86_64-Release/abcdefgh/foo_bar         160MiB |\n"
             "|    1   N/A  N/A     10734      C   ...-x86_64-Release/abcdefgh/foo_bar         160MiB |\n")
    assert all(c["level"] != "structural" for c in diagnose_text(other)["causes"])


def test_collective_mismatch_names_its_reporting_rank():
    # https://github.com/Lightning-AI/pytorch-lightning/issues/19106: torch's ProcessGroupWrapper names its own
    # rank first ("Rank <self> is running collective: ..., but Rank <other> is running ...")
    from distdoctor.diagnose.prefixes import message_rank
    line = ("RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: "
            "CollectiveFingerPrint(SequenceNumber=21, OpType=BROADCAST, TensorShape=[1], TensorDtypes=Long, ")
    assert message_rank(line) == 1


def test_launcher_and_logger_prefixes_before_torchs():
    """Parser cases: pdsh (DeepSpeed's multi-node runner) puts the host in front of torch's prefix, Lightning
    writes [rank: N], a logger a bracketed time stamp; an exception name is never taken for a host."""
    assert split_prefix("worker-1: [rank3]: RuntimeError: CUDA error: invalid device ordinal")[0] == 3
    assert split_prefix("10.0.0.7: [default2]:Traceback (most recent call last):")[0] == 2
    assert split_prefix("[rank: 1] Seed set to 42")[0] == 1
    rank, ts, _ = split_prefix("[2024-11-20 14:37:16,123] [rank3]: RuntimeError: x")
    assert rank == 3 and ts[:6] == (2024, 11, 20, 14, 37, 16)
    assert split_prefix("RuntimeError: [rank3]: x")[0] is None
