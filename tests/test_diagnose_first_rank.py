"""The first failing rank where a log names only a LOCAL rank or a node (torchrun --log-dir folders of several
nodes, srun --label over torchrun agents), and a lone timeout read by its cause. Logs: real runs here
(tests/data/logs/*.meta.yaml say how), and live torchrun runs of evals/programs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from distdoctor.diagnose import diagnose_paths, diagnose_text
from distdoctor.diagnose.node_ranks import LocalRanks
from distdoctor.runner import run_torchrun

LOGS = Path(__file__).resolve().parent / "data" / "logs"
PROGRAMS = Path(__file__).resolve().parent.parent / "evals" / "programs"
TWO_NODES = LOGS / "gen_segv_two_nodes_logdir.d"


def _crashed_folder() -> Path:
    """The attempt folder (one node) whose stderr.log holds the SIGSEGV (which node got ranks 2-3 varies)."""
    crash = next(p for p in TWO_NODES.glob("*/attempt_0/*/stderr.log") if "Segmentation fault" in p.read_text())
    return crash.parent.parent


def test_logdir_folders_of_two_nodes_are_local_ranks():
    """Global rank 3 crashed; its folder is numbered 1 (local). Rank 2's own [rank2]: lines beside it place
    that node at ranks 2-3."""
    ff = diagnose_paths([str(TWO_NODES)])["first_failure"]
    assert ff["rank"] == 3 and "Segmentation fault" in ff["text"], ff
    assert ff["file"].startswith(str(_crashed_folder())) and ff["file"].endswith("/1/stderr.log")


def test_logdir_one_node_of_two_alone(tmp_path):
    """That node's folder alone: the same pair places it."""
    node = tmp_path / "node"
    shutil.copytree(_crashed_folder(), node / "attempt_0")
    assert diagnose_paths([str(node)])["first_failure"]["rank"] == 3


def test_logdir_of_two_nodes_without_a_stated_pair_names_no_rank(tmp_path):
    """The same folders without the crashed node's other worker file (the only line that tied it to global
    ranks): two nodes number their folders 0 and 1 alike, so folder 1 is no rank: none is named, never 1."""
    logs = tmp_path / "logs"
    shutil.copytree(TWO_NODES, logs)
    sibling = logs / _crashed_folder().relative_to(TWO_NODES) / "0"
    shutil.rmtree(sibling)
    ff = diagnose_paths([str(logs)])["first_failure"]
    assert "Segmentation fault" in ff["text"] and ff["rank"] is None, ff


def test_logdir_of_one_node_keeps_the_folder_number():
    """One node's folders (standalone torchrun): a local rank is the global one."""
    ff = diagnose_paths([str(LOGS / "gen_peer_died_logdir.d")])["first_failure"]
    assert ff["rank"] == 1 and ff["file"].endswith("attempt_0/1/stderr.log")


@pytest.mark.parametrize("name", ["gen_segv_srun_torchrun", "gen_segv_srun_torchrun_tee"])
def test_srun_labels_over_torchrun_agents_are_nodes(name):
    """`srun --label torchrun ...`: the crash carries srun's task id 1 (a node), or that and torchrun's local
    rank 1; the task's torchrun summary names rank 3."""
    ff = diagnose_paths([str(LOGS / f"{name}.log")])["first_failure"]
    assert ff["rank"] == 3 and "Segmentation fault" in ff["text"], ff


def test_srun_labels_are_ranks_where_srun_starts_the_workers():
    """`srun --label python ...` (one task per rank) whose script carries @record: the survivors' tracebacks show
    a torch/distributed/elastic frame, yet no agent ran; the crash's label 1 is its rank."""
    ff = diagnose_paths([str(LOGS / "gen_segv_srun_python_record.log")])["first_failure"]
    assert ff["rank"] == 1 and "Segmentation fault" in ff["text"], ff


def test_srun_label_and_local_rank_without_the_summary_name_no_rank():
    """The --tee log without torchrun's summary and its "local_rank:" line: "1: [default1]:" is local rank 1
    of the second of two agents, whose first rank nothing states: no rank (not task 1, not local 1)."""
    text = (LOGS / "gen_segv_srun_torchrun_tee.log").read_text(encoding="utf-8")
    cut = "\n".join(ln for ln in text.splitlines() if "rank      :" not in ln and "local_rank:" not in ln)
    ff = diagnose_text(cut)["first_failure"]
    assert "Segmentation fault" in ff["text"] and ff["rank"] is None, ff


def test_local_ranks_pairs():
    lr = LocalRanks()
    lr.folder(0, "n0/attempt_0", 0)
    lr.folder(1, "n0/attempt_0", 1)
    assert lr.global_rank("n0/attempt_0", 1) == 1          # one node: the folder number
    assert lr.global_rank("n0/attempt_0", 1, world=4) is None  # 4 ranks, 2 folders: one node of two
    lr.pair("n0/attempt_0", 0, 2)
    assert lr.global_rank("n0/attempt_0", 1, world=4) == 3
    lr.folder(2, "n1/attempt_0", 1)
    assert lr.global_rank("n1/attempt_0", 1) is None       # another node's folder, no pair there
    lr.pair("n0/attempt_0", 1, 7)
    assert lr.global_rank("n0/attempt_0", 0) == 2 and lr.global_rank(("console", 5, None), 3) == 3


@pytest.mark.torchrun
@pytest.mark.parametrize("late", [0, 1])
def test_lone_timeout_of_start_skew_names_the_late_rank(late):
    """2 ranks, rank `late` 'tokenises' past the group timeout: the other one times out in the barrier. The cause
    is rank_start_skew, so the rank named is the late one (it printed no error), and the output says why."""
    res = run_torchrun(PROGRAMS / "fail_rank0_prework.py", nproc=2, script_args=["--late-rank", str(late)], timeout=90)
    assert "Timed out waiting 5000ms" in res.output, res.output[-2000:]
    got = diagnose_text(res.output)
    ff = got["first_failure"]
    assert got["causes"][0]["id"] == "rank_start_skew", got["causes"][:3]
    assert ff["rank"] == late and ff["timed_out_ranks"] == [1 - late], ff
    assert f"rank {1 - late} timed out waiting for rank {late}" in ff["because"]


@pytest.mark.torchrun
def test_lone_timeout_of_a_rank_conditional_collective_names_the_rank_that_timed_out():
    """Rank 0 alone runs an all_reduce (rank_conditional_collective): the rank that timed out is the one that
    ran the extra collective, so it is named, with no 'because'."""
    res = run_torchrun(PROGRAMS / "fail_rank0_allreduce.py", nproc=2, timeout=90)
    assert "Timed out waiting 5000ms" in res.output, res.output[-2000:]
    got = diagnose_text(res.output)
    ff = got["first_failure"]
    assert got["causes"][0]["id"] == "rank_conditional_collective", got["causes"][:3]
    assert ff["rank"] == 0 and "because" not in ff, ff


NCCL_TESTS_252 = LOGS / "public_fabric_fault_nccltests252.log"  # https://github.com/NVIDIA/nccl-tests/issues/252


def test_nccl_closed_by_local_rank_on_two_hosts_names_no_rank():
    """The public log's "Connection closed by localRank N" lines alone (hosts kolyoz1 and kolyoz2): N is a
    rank of the reporting host's node; with two nodes and no offset stated, no global rank (never 0)."""
    lines = [ln for ln in NCCL_TESTS_252.read_text(encoding="utf-8").splitlines() if "closed by localRank" in ln]
    assert {ln.split(":")[0] for ln in lines} == {"kolyoz1", "kolyoz2"}
    ff = diagnose_text("\n".join(lines))["first_failure"]
    assert ff["seen_by"] == "peers" and "localRank" in ff["text"] and ff["rank"] is None, ff


def test_nccl_closed_by_local_rank_on_one_host_is_the_rank():
    """One host in the log (the olmo field report): the local rank is the global one."""
    ff = diagnose_paths([str(LOGS / "field_olmo_connection_closed.log")])["first_failure"]
    assert ff["rank"] == 0 and "closed by localRank 0" in ff["text"]


def test_nccl_local_rank_offsets_from_its_communicator_lines():
    """NCCL's own communicator line places a host: rank 7 is localRank 7 on nathan-h100-1 (NVIDIA/nccl#1519,
    2 nodes), so local rank 3 there is rank 3; "nNodes 1" (NVIDIA/nccl-tests#213) means one node."""
    from distdoctor.diagnose.prefixes import NcclRanks

    line = ("nathan-h100-1:11902:11975 [7] NCCL INFO comm 0x562d61d79a30 rank 7 nRanks 16 nNodes 2 localRanks 8 "
            "localRank 7 MNNVL 0")
    nccl = NcclRanks()
    nccl.read(line)
    nccl.see(line)
    assert nccl.global_of_local(line, 3) == 3
    other = "kolyoz2:25146:25852 [0] NCCL INFO [Service thread] Connection closed by localRank 0"  # nccl-tests#252
    assert nccl.global_of_local(other, 0) is None  # 2 nodes, and that host's place is not stated
    one = NcclRanks()
    one.read("hw14:798:811 [1] NCCL INFO comm 0x55a7be569d00 rank 1 nRanks 8 nNodes 1 localRanks 8 localRank 1 MNNVL 0")
    assert one.global_of_local("hw14:798:810 [0] NCCL INFO comm 0x55a7be5601c0 rank 0 nRanks 8 nNodes 1 localRanks 8 "
                               "localRank 0 MNNVL 0", 5) == 5


def test_a_quote_that_starts_at_a_raise_source_line_takes_the_ranked_error_line():
    """A thread quotes a traceback from its `raise` source line (no frame, no rank) and then rank 5's error line
    (deepspeedai/DeepSpeed#6441, evals/corpus): the source line is no failure of its own, rank 5's line is."""
    log = (Path(__file__).resolve().parent.parent / "evals" / "corpus" / "deepspeedai-deepspeed-6441.log").read_text()
    assert log.splitlines()[0].lstrip().startswith("raise ") and "[rank5]:" in log.splitlines()[1]
    ff = diagnose_text(log)["first_failure"]
    assert ff["rank"] == 5 and ff["line"] == 2


def test_the_summary_quotes_the_ranks_own_traceback() -> None:
    """A worker whose main is wrapped in @record writes an error file, and torchrun's summary quotes that rank's
    traceback ("traceback : Traceback (most recent call last):" ... "NameError: ..."). Where the rank's own lines
    are missing from the log, that quote is its first failure, not the summary's exitcode line (real log: the
    train corpus case pytorch/pytorch#73465, rank 304 of a Slurm job)."""
    case = Path(__file__).resolve().parent.parent / "evals" / "corpus" / "pytorch-pytorch-73465.log"
    text = case.read_text(encoding="utf-8")
    first = diagnose_text(text)["first_failure"]
    assert first["rank"] == 304 and first["text"].strip() == "NameError: name 'die' is not defined", first
    # with the rank's own traceback earlier in the log, that one stays the first failure
    own = "[rank304]: Traceback (most recent call last):\n[rank304]:   File \"train.py\", line 3, in <module>\n" \
          "[rank304]: ValueError: bad shard\n"
    first = diagnose_text(own + text)["first_failure"]
    assert first["rank"] == 304 and "ValueError: bad shard" in first["text"], first


# Two ranks that fail alike close together (the brief's "two ranks failing close together"): real logs of
# evals/programs/fail_rank_shapes.py --plan 2:raise:0,1:raise:N, where rank 2 raised first.

def test_two_ranks_failing_alike_with_an_echo_between_name_the_first():
    """--tee console: rank 2's ValueError, then a peer's 'Connection closed by peer', then rank 1's same ValueError:
    the job was already coming down when rank 1 failed. Not 'the same failure on every rank'."""
    ff = diagnose_paths([str(LOGS / "gen_two_close_tee.log")])["first_failure"]
    assert ff["rank"] == 2 and "ValueError: bad batch" in ff["text"], ff


def test_two_ranks_failing_alike_are_one_failure_without_an_echo_between():
    """The same console without the echoes (only the two ranks' own tracebacks and the agent's lines): nothing
    orders the two copies but their print order, so no rank is named (never rank 1)."""
    text = (LOGS / "gen_two_close_tee.log").read_text(encoding="utf-8")
    cut = "\n".join(ln for ln in text.splitlines() if not ln.startswith(("[default0]:", "[default3]:")))
    ff = diagnose_text(cut)["first_failure"]
    assert ff["rank"] is None and "ValueError: bad batch" in ff["text"], ff


def test_rank_files_joined_with_their_times_are_ordered_by_time():
    """srun tasks' files (rank_%t.log, each line through moreutils ts) joined rank after rank: rank 1's copy comes
    first in the file, ts says rank 2 raised 0.4 s earlier."""
    text = (LOGS / "gen_two_close_srun_ts.log").read_text(encoding="utf-8")
    assert text.index("[rank1]: ValueError") < text.index("[rank2]: ValueError")
    ff = diagnose_text(text)["first_failure"]
    assert ff["rank"] == 2 and "[rank2]: ValueError" in ff["text"], ff


def test_rank_files_joined_without_times_name_no_rank():
    """The same files with ts's stamps taken off: positions in joined files order nothing: no rank, never 1."""
    text = (LOGS / "gen_two_close_srun_ts.log").read_text(encoding="utf-8")
    bare = "\n".join(ln.split(" ", 2)[2] if ln[:4].isdigit() else ln for ln in text.splitlines())
    assert "[rank1]: ValueError" in bare and "2026-" not in bare
    ff = diagnose_text(bare)["first_failure"]
    assert ff["rank"] is None and "ValueError: bad batch" in ff["text"], ff


@pytest.mark.parametrize("name,rank", [("gen_clock_prefix_raise2", 2), ("gen_ts_pipe_kill3", 3),
                                       ("gen_spawn_raise2", 2), ("gen_launch_legacy_raise2", 2),
                                       ("gen_progress_midline_raise2", 2), ("gen_crlf_tee_raise2", 2),
                                       ("gen_srun11_raise10", 10), ("gen_oom_alloc_rank1", 1)])
def test_first_rank_in_the_shapes_a_log_arrives_in(name, rank):
    """Real logs (tests/data/logs/<name>.meta.yaml says how each was made); the raw ones (progress redraws, CRLF)
    are read as bytes, as a file is."""
    ff = diagnose_paths([str(LOGS / f"{name}.log")])["first_failure"]
    assert ff["rank"] == rank, ff
