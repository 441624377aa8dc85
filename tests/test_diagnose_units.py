"""Units of the diagnosis: prefixes, timestamps, anchors, blocks, tracebacks, first failure."""

import gzip
import io
import textwrap

import pytest

from distdoctor.diagnose import diagnose_paths, diagnose_text
from distdoctor.diagnose.matcher import anchors_of, trie_regex
from distdoctor.diagnose.prefixes import common_indent, parse_timestamp, rank_from_path, split_prefix, strip_ansi
from distdoctor.diagnose.sources import MAX_LINE, ScanStats, blocks
from distdoctor.knowledge import load_entries
from distdoctor.paths import ROOT

LOGS = ROOT / "tests" / "data" / "logs"


@pytest.mark.parametrize("line,rank,body", [
    ("[rank3]: RuntimeError: boom", 3, " RuntimeError: boom"),
    ("[rank12]:[E1123 07:12:03.210760729 ProcessGroupGloo.cpp:67] x", 12, "[E1123 07:12:03.210760729 ProcessGroupGloo.cpp:67] x"),
    ("[default0]:Traceback (most recent call last):", 0, "Traceback (most recent call last):"),
    ("[trainer3]:hello", 3, "hello"),
    ("0: [rank5]: ValueError: x", 5, " ValueError: x"),
    ("7: ValueError: x", 7, "ValueError: x"),
    ("g3053:2 Traceback (most recent call last):", 2, "Traceback (most recent call last):"),
    # Python's warnings print "file:line: Category: message" (warnings.formatwarning): a line number, not a rank
    ("train.py:45: UserWarning: x", None, "train.py:45: UserWarning: x"),
    ("1: a.py:3: FutureWarning: x", 1, "a.py:3: FutureWarning: x"),
    ("utils.cpp:12 x", None, "utils.cpp:12 x"),
    ("host.cluster.local:3: x", 3, "x"),
    ("[R1/4][LR1] boom", 1, "boom"),
    ("Thu Aug 29 16:41:02 2019[3]<stderr>:  File x", 3, "  File x"),
    ("[1,2]<stderr>:oops", 2, "oops"),
    ("2025-06-16 16:58:45.173\tg3053:1\tolmo_core.train.trainer:648\tERROR\tx", 1, "olmo_core.train.trainer:648\tERROR\tx"),
    ("kolyoz1:27255:27934 [0] NCCL INFO x", None, "NCCL INFO x"),
    ("RuntimeError: plain", None, "RuntimeError: plain"),
    ("E1123 07:09:50.991000 10364 api.py:1002] failed", None, "E1123 07:09:50.991000 10364 api.py:1002] failed"),
    ("07:09:50 step", None, "07:09:50 step"),
    # a wrapper's bracketed clock and moreutils ts (tests/data/logs/gen_clock_prefix_raise2, gen_ts_pipe_kill3)
    ("[06:56:16] [rank2]: ValueError: x", 2, " ValueError: x"),
    ("Nov 27 06:56:31 [default3]:hello", 3, "hello"),
    ("Nov  7 06:56:31.104577 1: [rank1]: x", 1, " x"),
    ("2024-11-20 14:37:16 [rank3]: torch.OutOfMemoryError: x", 3, " torch.OutOfMemoryError: x"),
    # TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE="[${rank}]:" (tests/data/logs/gen_exit_code_rank2_prefix.log)
    ("[2]:rank 2: giving up at step 2", 2, "rank 2: giving up at step 2"),
    ("[3]:[rank3]: Traceback (most recent call last):", 3, " Traceback (most recent call last):"),
    ("[1]:", None, "[1]:"),  # an index line of torchrun's failure table, not a rank
    # https://github.com/modelscope/ms-swift/issues/7992 (a clock time before torch's prefix)
    ("18:11:06.680 [rank4]:[E205 18:11:06.375750231 ProcessGroupNCCL.cpp:1870] x", 4,
     "[E205 18:11:06.375750231 ProcessGroupNCCL.cpp:1870] x"),
    # https://github.com/horovod/horovod/issues/2097
    ("Fri Sep 25 16:52:57 2020[0]<stderr>:User function raise error: 2 root error(s) found.", 0,
     "User function raise error: 2 root error(s) found."),
    # https://github.com/horovod/horovod/issues/2255 (mpirun)
    ("[1,0]<stdout>:Train Epoch: 1 [0/60000 (0%)]\tLoss: 2.319920", 0, "Train Epoch: 1 [0/60000 (0%)]\tLoss: 2.319920"),
    # SageMaker's MPI launcher (https://github.com/pacman100/accelerate-aws-sagemaker, README's output logs)
    ("[1,mpirank:3,algo-1]<stderr>:INFO:root:Reducer buckets have been rebuilt in this iteration.", 3,
     "INFO:root:Reducer buckets have been rebuilt in this iteration."),
    # SkyPilot's node prefix (skypilot-org/skypilot, examples/gcp_gpu_direct_tcpx/README.md): a node, not a rank
    ("(worker1, rank=1, pid=2769, ip=10.100.10.12) [rank9]: x", 9, " x"),
    ("(head, rank=0, pid=3808) [1,0]<stdout>:#  Rank  0 Group  0", 0, "#  Rank  0 Group  0"),
    # a log collector's time (kubectl logs --timestamps): one separator peeled, the frame's indentation kept
    ("2024-05-01T12:00:00.123456789Z   File \"x.py\", line 3, in f", None, '  File "x.py", line 3, in f'),
    ("2024-05-01T12:00:00Z 1: [rank1]: RuntimeError: x", 1, " RuntimeError: x"),  # srun's label still leads
    ("[pod/trainer-0/pytorch] [rank2]: x", 2, " x"),
    ("trainer-1  | Traceback (most recent call last):", None, "Traceback (most recent call last):"),
    # a runner naming the process and its stream (mila-iqia/milabench#281): peeled, the rank behind it read
    ("diffusion-nodes.cn-n001.server.mila.quebec.nolog [stderr] [rank11]: Traceback (most recent call last):", 11,
     " Traceback (most recent call last):"),
    ("[stdout] 1: [rank1]: x", 1, " x"),  # a collector's: srun's label may still follow
    ("    [rank3]: x", 3, " x"),  # pasted indented: the prefix behind the indentation still leads
    ("    x = torch.ones(1)", None, "    x = torch.ones(1)"),
])
def test_rank_prefixes(line, rank, body):
    r, _, b = split_prefix(line)
    assert (r, b) == (rank, body)


@pytest.mark.parametrize("text,expected", [
    ("E1123 07:09:50.991000 10364 api.py", (0, 11, 23, 7, 9, 50, 0.991)),
    ("[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616]"[0:0] + "[E0626 06:24:44.5 P]", (0, 6, 26, 6, 24, 44, 0.5)),
    ("[INFO] 2021-09-13 22:17:26,651 run: x", (2021, 9, 13, 22, 17, 26, 0.651)),
    ("  time      : 2026-11-23_07:09:50", (2026, 11, 23, 7, 9, 50, 0.0)),
    ("[03/17/23 20:03:12] INFO x", (2023, 3, 17, 20, 3, 12, 0.0)),
    ("Thu Aug 29 16:41:02 2019 x", (2019, 8, 29, 16, 41, 2, 0.0)),
    ("ERROR 07-13 10:41:52 [core.py:588] x", (0, 7, 13, 10, 41, 52, 0.0)),
    # a prefix's clock alone (the day unknown) and moreutils ts's stamp (no year)
    ("[06:56:16]", (0, 0, 0, 6, 56, 16, 0.0)),
    ("Nov 27 06:56:31.104577", (0, 11, 27, 6, 56, 31, 0.104577)),
    ("12:00:01 is not a prefix's clock when text follows", None),
    ("no time here", None),
])
def test_timestamps(text, expected):
    assert parse_timestamp(text) == expected


def test_ansi_and_paths():
    assert strip_ansi("\x1b[31mRuntimeError\x1b[0m: x") == "RuntimeError: x"
    assert rank_from_path("run/attempt_0/3/stderr.log") == 3
    assert rank_from_path("logs/rank_12.log") == 12
    assert rank_from_path("logs/rank-2.txt") == 2
    assert rank_from_path("logs/train.log") is None
    assert rank_from_path("ranking/a.log") is None


def test_anchors_are_required_literals():
    import re
    for e in load_entries():
        for s in e.signatures:
            anchors, ic = anchors_of(s.regex)
            for sample in (q.text for q in e.quotes):
                for line in sample.splitlines():
                    if re.search(s.regex, line) and anchors:
                        low = line.lower()
                        assert any((a.lower() in low) if ic else (a in line) for a in anchors), (s.regex, line)
    both = anchors_of(r"(errno: 98 - )?Address already in use|address already in use")[0]
    assert len(both) == 2 and both[0] in "Address already in use" and both[1] in "address already in use"
    assert anchors_of(r"\d+ms") == ((), False)
    rx = re.compile(trie_regex(["Error", "EADDRINUSE", "Traceback"], [r"E\d{4} "]))
    assert [m.group() for m in rx.finditer("x Error E1123 EADDRINUSE Trace Traceback")] == [
        "Error", "E1123 ", "EADDRINUSE", "Traceback"]


def test_signature_without_literal_still_matches(tmp_path):
    (tmp_path / "x.md").write_text(textwrap.dedent("""\
        ### port_in_use — port taken

        ```yaml
        cause: port_in_use
        patch: null
        related: []
        verify: "run it"
        signatures:
          - regex: "\\\\d{5}\\\\s\\\\d{5}"
            proves: "two numbers"
            kind: root
        ```
        """), encoding="utf-8")
    r = diagnose_text("noise\n[rank1]: boom 12345 67890\nnoise\n", references_root=tmp_path)
    assert r["causes"][0]["id"] == "port_in_use" and r["causes"][0]["evidence"][0]["line"] == 2


def test_blocks_cut_long_lines_and_count():
    from distdoctor.diagnose.sources import BLOCK
    data = b"a\n" + b"x" * (3 * BLOCK) + b"\nlast line\nno newline"
    stats = ScanStats()
    out = list(blocks(io.BytesIO(data), stats, "t"))
    joined = b"".join(b for _, b in out)
    assert joined.count(b"\n") == 4 and stats.cut_lines == 1
    assert max(len(x) for x in joined.split(b"\n")) <= MAX_LINE
    assert out[-1][0] == 4 and stats.lines == 4


def test_traceback_is_one_event_and_first_failure_by_order():
    log = textwrap.dedent("""\
        [rank1]: Traceback (most recent call last):
        [rank1]:   File "train.py", line 3, in <module>
        [rank1]:     raise ValueError("bad batch")
        [rank1]: ValueError: bad batch
        [rank0]: Traceback (most recent call last):
        [rank0]:   File "train.py", line 5, in <module>
        [rank0]: RuntimeError: [../gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:4992. This is typically caused by a remote worker crashing.
        """)
    r = diagnose_text(log)
    assert r["first_failure"]["rank"] == 1 and r["first_failure"]["line"] == 4
    assert r["first_failure"]["text"].endswith("ValueError: bad batch")
    assert r["causes"][0]["id"] == "peer_died_first"
    assert [e["rank"] for e in r["echoes"]] == [0]


def test_first_failure_by_time_across_files(tmp_path):
    (tmp_path / "rank_0.log").write_text(
        "[INFO] 2024-01-01 10:00:05,000 step\n[ERROR] 2024-01-01 10:00:09,000 RuntimeError: shape '[4, 8]' is invalid for input of size 30\n")
    (tmp_path / "rank_1.log").write_text(
        "[INFO] 2024-01-01 10:00:05,000 step\n[ERROR] 2024-01-01 10:00:07,000 AssertionError: for now i think we need CUDA for DDP\n")
    r = diagnose_paths([str(tmp_path)])
    assert r["first_failure"]["rank"] == 1
    assert r["causes"][0]["id"] == "nccl_without_cuda"


def test_root_cause_of_first_failure_wins_over_echoes():
    log = "\n".join(["[rank0]: RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one."]
                    + [f"[rank{i}]: RuntimeError: [pair.cc:1] Connection reset by peer" for i in range(1, 8)])
    r = diagnose_text(log)
    assert r["causes"][0]["id"] == "unused_parameters"
    assert r["first_failure"]["rank"] == 0
    assert "peer_died_first" in [c["id"] for c in r["causes"]]


def test_same_failure_on_every_rank_has_no_first_rank():
    log = "\n".join(f"[rank{i}]: RuntimeError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!" for i in range(4))
    r = diagnose_text(log)
    assert r["causes"][0]["id"] == "nccl_without_cuda"
    assert r["first_failure"]["rank"] is None and r["first_failure"]["all_ranks"]


def test_agent_summary_names_the_killed_rank():
    log = textwrap.dedent("""\
        [rank0]: RuntimeError: [/x/gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:1939. This is typically caused by a remote worker crashing.
        Root Cause (first observed failure):
        [0]:
          time      : 2026-11-23_07:21:26
          host      : localhost
          rank      : 1 (local_rank: 1)
          exitcode  : -9 (pid: 18634)  (SIGKILL)
        """)
    r = diagnose_text(log)
    assert r["first_failure"]["rank"] == 1 and r["first_failure"]["seen_by"] == "agent"
    assert r["causes"][0]["id"] == "peer_died_first"


def test_context_only_uses_keywords():
    r = diagnose_text("", context="generation hangs; it runs under if rank == 0")
    assert r["causes"] and r["causes"][0]["id"] == "rank_conditional_collective"
    assert r["first_failure"] is None
    assert diagnose_text("", context="")["causes"] == []


def test_gz_and_temp_references(tmp_path):
    refs = tmp_path / "refs"
    refs.mkdir()
    (refs / "x.md").write_text(textwrap.dedent("""\
        ### port_in_use — port taken

        ```yaml
        cause: port_in_use
        patch: null
        related: []
        verify: "run it"
        signatures:
          - regex: "(?i)eaddrinuse"
            proves: "port taken"
            kind: root
            weight: 5
        ```

        **Fix**
        Pick a free port.
        """), encoding="utf-8")
    log = tmp_path / "a.log.gz"
    with gzip.open(log, "wt") as f:
        f.write("start\n" * 1000 + "[rank0]: RuntimeError: name: EADDRINUSE\n")
    r = diagnose_paths([str(log)], references_root=refs)
    assert r["causes"][0]["id"] == "port_in_use"
    assert r["first_failure"]["line"] == 1001 and r["fix"] == "Pick a free port."


def test_hyperscan_re2_and_re_engines_agree(monkeypatch):
    """The fast prefilters (Hyperscan, RE2) and the pure-Python one find the same diagnosis on every corpus log."""
    from pathlib import Path
    pytest.importorskip("re2")
    logs = sorted((Path(__file__).parent / "data" / "logs").glob("*.log"))
    runs = {}
    for engine, env in (("hyperscan", {}), ("re2", {"DISTDOCTOR_NO_HYPERSCAN": "1"}), ("re", {"DISTDOCTOR_NO_RE2": "1"})):
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        runs[engine] = [diagnose_paths([str(p)]) for p in logs]
    pytest.importorskip("hyperscan")
    for engine, results in runs.items():
        assert results[0]["stats"]["engine"] == engine
    fast, mid, slow = runs["hyperscan"], runs["re2"], runs["re"]
    for p, a, m, b in zip(logs, fast, mid, slow):
        for x in (a, m):
            assert [c["id"] for c in x["causes"]] == [c["id"] for c in b["causes"]], p.name
            assert x["first_failure"] == b["first_failure"], p.name
            assert x["stats"]["candidates"] == b["stats"]["candidates"], p.name


def test_results_do_not_depend_on_block_boundaries(monkeypatch):
    """Tiny read blocks (lines, tracebacks and torchrun summaries cut across blocks) change nothing."""
    from pathlib import Path
    import distdoctor.diagnose.sources as sources
    logs = sorted((Path(__file__).parent / "data" / "logs").glob("*.log"))
    normal = [diagnose_paths([str(p)]) for p in logs]
    monkeypatch.setattr(sources, "BLOCK", 37)
    tiny = [diagnose_paths([str(p)]) for p in logs]
    for p, a, b in zip(logs, normal, tiny):
        assert [(c["id"], c["score"]) for c in a["causes"]] == [(c["id"], c["score"]) for c in b["causes"]], p.name
        assert a["first_failure"] == b["first_failure"], p.name
        assert a["stats"]["lines"] == b["stats"]["lines"], p.name


def test_traceback_takes_the_time_of_its_logging_line(tmp_path):
    """Per-rank files from Python logging: the traceback lines have no time, the ERROR line before has."""
    (tmp_path / "rank_0.log").write_text(
        "2024-01-01 10:00:09,000 ERROR step failed:\nTraceback (most recent call last):\n"
        '  File "t.py", line 1, in <module>\nRuntimeError: shape \'[4, 8]\' is invalid for input of size 30\n')
    (tmp_path / "rank_1.log").write_text(
        "2024-01-01 10:00:07,000 ERROR step failed:\nTraceback (most recent call last):\n"
        '  File "t.py", line 1, in <module>\nValueError: labels contain NaN\n')
    r = diagnose_paths([str(tmp_path)])
    assert r["first_failure"]["rank"] == 1 and r["first_failure"]["text"] == "ValueError: labels contain NaN"


def test_when_and_unless_conditions_look_at_the_whole_input():
    error = "ValueError: Default process group has not been initialized, please make sure to call init_process_group."
    alone = diagnose_text(error)
    assert alone["causes"][0]["id"] == "single_process_launch"
    assert "nccl_without_cuda" not in [c["id"] for c in alone["causes"]]
    launched = diagnose_text(error + "\n...\nRoot Cause (first observed failure):\n[0]:\n  rank      : 0 (local_rank: 0)\n")
    assert launched["causes"][0]["id"] == "nccl_without_cuda"
    assert "single_process_launch" not in [c["id"] for c in launched["causes"]]
    # the condition came after the signature's line: conditions are settled once the whole input is read
    assert [e["kind"] for e in launched["causes"][0]["evidence"]][:1] == ["first failure"]


GLOO_TIMEOUT = ("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] "
                "Timed out waiting 5000ms for recv operation to complete")


def _causes(text: str) -> list[str]:
    return [c["id"] for c in diagnose_text(text)["causes"]]


def test_batch_counts_that_differ_between_ranks_explain_a_timeout():
    uneven = f"[rank0]: 3 batches\n[rank1]: 2 batches\n[rank0]: {GLOO_TIMEOUT}\n"
    r = diagnose_text(uneven)
    assert r["causes"][0]["id"] == "dataloader_uneven"
    # the counts that differ lead the evidence, after the first failure's own line
    kinds = [(e["kind"], e["rank"]) for e in r["causes"][0]["evidence"]][:3]
    assert kinds == [("first failure", 0), ("ranks differ", 0), ("ranks differ", 1)]
    assert r["causes"][0]["evidence"][1]["proves"] == "rank 0 reports 3; rank 1 reports 2"
    # the generic readings of the same line step aside
    assert "rank_conditional_collective" not in _causes(uneven) and "collective_timeout" not in _causes(uneven)


def test_equal_batch_counts_leave_a_timeout_to_the_generic_causes():
    even = f"[rank0]: 2 batches\n[rank1]: 2 batches\n[rank0]: {GLOO_TIMEOUT}\n"
    got = _causes(even)
    assert "dataloader_uneven" not in got and got[0] == "rank_conditional_collective"


def test_batch_counts_read_from_interleaved_output_and_rank_words():
    # two ranks' prints on one line, no rank prefixes: the rank comes from the regex's rank group
    r = diagnose_text(f"rank 1: 2 batchesrank 0: 3 batches\n{GLOO_TIMEOUT}\n")
    assert r["causes"][0]["id"] == "dataloader_uneven"
    shown = [e for e in r["causes"][0]["evidence"] if e["kind"] == "ranks differ"]
    assert [(e["line"], e["rank"]) for e in shown] == [(1, None)]  # one line holding both ranks' counts
    # counts with no rank anywhere cannot be compared
    assert "dataloader_uneven" not in _causes(f"3 batches\n2 batches\n{GLOO_TIMEOUT}\n")


def test_rank_values_are_bounded():
    from distdoctor.diagnose.rank_values import RankValues
    from distdoctor.diagnose.events import Line
    rv = RankValues()
    ln = Line(0, "f", 1, 0, None, "x", [])
    for r in range(RankValues.MAX_RANKS + 50):
        for v in range(RankValues.MAX_VALUES + 5):
            rv.add("c", r, str(v), ln)
    assert len(rv.values["c"]) == RankValues.MAX_RANKS
    assert max(len(v) for v in rv.values["c"].values()) == RankValues.MAX_VALUES
    assert rv.differing() == {}


def test_explicit_monitored_barrier_names_a_late_rank_not_a_reason():
    late = ("[rank0]: RuntimeError: [Rank 0]: Rank 1 failed to pass monitoredBarrier in 3000 ms\n")
    explicit = ('[rank0]:   File "/x/torch/distributed/distributed_c10d.py", line 5435, in monitored_barrier\n' + late)
    checked = ('[rank0]:   File "/x/torch/distributed/distributed_c10d.py", line 3245, in all_reduce\n' + late)
    assert _causes(explicit)[0] == "collective_timeout"
    # the same message from a collective checked under TORCH_DISTRIBUTED_DEBUG=DETAIL
    assert _causes(checked)[0] == "rank_conditional_collective" and "collective_timeout" not in _causes(checked)


def test_a_log_cut_inside_a_traceback_still_has_that_ranks_failure():
    cut = textwrap.dedent("""\
        [rank8]:   File "recipes/train_ft.py", line 981, in run_train_validation_loop
        [rank8]:     self.save_checkpoint(
        [rank8]:   File "checkpoint/checkpointing.py", line 2011, in _create_dirs
        [rank8]:     os.makedirs(directory, exist_ok=True)
        [rank8]:   File "<frozen os>", line 225, in makedirs
        """)
    r = diagnose_text(cut)
    assert r["first_failure"]["rank"] == 8
    assert r["first_failure"]["text"].endswith("in makedirs")  # the last frame, where it failed
    assert r["causes"][0]["id"] == "download_race"
    # a frame with no header after other lines of the same rank is stray: no event of its own
    frames = '[rank2]:   File "a.py", line 3, in f\n[rank2]:   File "b.py", line 9, in g\n'
    assert diagnose_text(frames)["first_failure"]["rank"] == 2
    stray = "[rank2]: Timeout for this group: 30 min\n" + frames
    assert diagnose_text(stray)["first_failure"] is None


def test_a_silent_run_gets_a_next_step_that_checks_the_process_group():
    r = diagnose_text("step 00002/00003 | loss: 5.854676\nTotal training time: 0.00m\n",
                      context="torchrun on 2 ranks exits 0, but are the ranks really training one model together?")
    assert r["first_failure"] is None and r["causes"][0]["id"] == "single_process_launch"
    assert r["next_step"].startswith("No rank logged an error") and "is_initialized()" in r["next_step"]
    # with no log at all (a person's words only) the advice is to collect the logs first
    words = diagnose_text("", context="torchrun on 2 ranks exits 0, but are the ranks really training together?")
    assert words["next_step"].startswith("No rank's own error is in these logs: collect")


def test_rank_named_inside_a_torch_message():
    from distdoctor.diagnose.prefixes import message_rank
    assert message_rank("RuntimeError: Timed out initializing process group in store based barrier on rank: 7, "
                        "for key: store_based_barrier_key:1 (world_size=8, worker_count=9, timeout=0:30:00)") == 7
    assert message_rank("[Rank 0]: Rank 1 failed to pass monitoredBarrier in 3000 ms") == 0
    assert message_rank("RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running") is None
    # https://github.com/NVIDIA/nccl/issues/849 (its title): the exception's name before the reporting rank
    assert message_rank("RuntimeError: [Rank 0]: Ranks 4, 5, 6, 7 failed to pass monitoredBarrier in 2000000 ms") == 0
    # https://github.com/pytorch/pytorch/issues/118369: a glog header before the reporting rank
    assert message_rank("[E ProcessGroupNCCL.cpp:458] [Rank 7] Watchdog caught collective operation timeout: "
                        "WorkNCCL(SeqNum=64088, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25625251 milliseconds "
                        "before timing out.") == 7
    # https://github.com/huggingface/open-r1/issues/620: C++'s what() line; and a subgroup's rank is not global
    # (https://github.com/modelscope/ms-swift/issues/7992)
    assert message_rank("  what():    what():    what():  [PG ID 0 PG GUID 0(default_pg) Rank 2] Process group "
                        "watchdog thread terminated with exception: [Rank 2]") == 2
    assert message_rank("[PG ID 12 PG GUID 99(EXPERT_MODEL_PARALLEL_GROUP) Rank 4] ProcessGroupNCCL's watchdog got "
                        "stuck for 480 seconds") is None
    r = diagnose_text("RuntimeError: Timed out initializing process group in store based barrier on rank: 7, for key: "
                      "store_based_barrier_key:1 (world_size=8, worker_count=9, timeout=0:30:00)\n")
    assert r["first_failure"]["rank"] == 7


def test_nccl_process_rank_from_its_communicator_line():
    """NCCL's [N] is a CUDA device; the communicator line ties the process (host:pid) to its rank.
    Lines: https://github.com/NVIDIA/nccl-tests/issues/15 (NCCL 2.2) and
    https://github.com/zai-org/CogVLM/issues/328 (a 10-rank communicator)."""
    from distdoctor.diagnose.prefixes import NcclRanks
    log = textwrap.dedent("""\
        gpu-bql-144-103:18553:18553 [0] INFO NET/Socket : 1 interfaces found
        NCCL version 2.2.13+cuda9.0
        gpu-bql-144-103:18553:18612 [0] INFO comm 0x7fa42c00a3b0 rank 0 nranks 2

        gpu-bql-144-103:18553:18611 [0] include/socket.h:360 WARN Call to connect failed : Connection timed out
        gpu-bql-144-103:18553:18611 [0] INFO transport/net_socket.cu:118 -> 2
        """)
    r = diagnose_text(log)
    assert r["first_failure"]["rank"] == 0 and "WARN Call to connect failed" in r["first_failure"]["text"]
    nccl = NcclRanks()
    assert nccl.read("603760c1c291:16956:18844 [7] NCCL INFO comm 0x55dbf256d2a0 rank 7 nranks 10 cudaDev 7 busId "
                     "d2000 commId 0x714dd0f00c283118 - Init COMPLETE")
    assert nccl.rank_of("603760c1c291:16956:16956 [7] NCCL INFO x") == 7
    assert nccl.rank_of("603760c1c291:16957:16957 [8] NCCL INFO x") is None  # its rank was not stated
    nccl.read("gpu-bql-144-103:18553:18612 [0] INFO comm 0x7fa42c00a3b0 rank 0 nranks 2")
    assert nccl.rank_of("gpu-bql-144-103:18553:18611 [0] x") is None  # a smaller communicator: not the world's


def test_an_unprefixed_traceback_belongs_to_the_rank_its_exception_names():
    """https://github.com/Lightning-AI/pytorch-lightning/issues/19106 (evals/corpus, train split): two ranks'
    frames interleave without prefixes; the exception names the rank that raised it."""
    log = textwrap.dedent("""\
          File "/myenv/python3.10/site-packages/lightning_fabric/utilities/distributed.py", line 220, in _sync_ddp
            torch.distributed.barrier(group=group)
            torch.distributed.barrier(group=group)
          File "/myenv/python3.10/site-packages/torch/distributed/c10d_logger.py", line 47, in wrapper
          File "/myenv/python3.10/site-packages/torch/distributed/c10d_logger.py", line 47, in wrapper
            work = default_pg.broadcast([tensor], opts)
        RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=21, OpType=BROADCAST, TensorShape=[1], TensorDtypes=Long)
        """)
    assert diagnose_text(log)["first_failure"]["rank"] == 1


def test_a_summary_tie_names_no_rank_unless_the_other_ranks_only_echo():
    """torchrun calls the lowest local rank found dead at one check "Root Cause": with several failures at
    the same second that is no order. Summary rows: tests/data/logs/gen_mixed_exits_filtered.log."""
    rows = [("1", "1 (pid: 29087) "), ("2", "-6 (pid: 29088)  (SIGABRT)"), ("3", "3 (pid: 29089) "),
            ("0", "1 (pid: 29086) ")]
    table = ["Failures:"]
    for i, (rank, code) in enumerate(rows):
        if i == len(rows) - 1:
            table.append("Root Cause (first observed failure):")
        table += [f"[{i}]:", "  time      : 2026-11-24_05:33:39", "  host      : localhost",
                  f"  rank      : {rank} (local_rank: {rank})", f"  exitcode  : {code}"]
    echo = ("[default0]:[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
            "Connection closed by peer [127.0.0.1]:3559. This is typically caused by a remote worker crashing.")
    r = diagnose_text("\n".join([echo] + table))
    assert r["first_failure"]["rank"] is None and r["first_failure"]["seen_by"] == "agent"
    # only rank 3 left its own mark (exit 3) while the others echo or were stopped: rank 3
    only = [echo] + [ln for ln in table if "(local_rank: 1)" not in ln and "(local_rank: 2)" not in ln
                     and "29087" not in ln and "29088" not in ln]
    assert diagnose_text("\n".join(only))["first_failure"]["rank"] == 3
    # an exception (exitcode 1) and a SIGABRT at the same second: NCCL's watchdog aborts the ranks that waited
    # on a dead peer, so the abort is no sign of going first
    abort = [echo] + [ln for ln in table if "(local_rank: 3)" not in ln and "29089" not in ln]
    assert diagnose_text("\n".join(abort))["first_failure"]["rank"] is None


def test_srun_task_exits_name_the_rank_where_no_worker_did():
    """tests/data/logs/slurm_task_dies.log without task 1's own lines (its output lost): srun's
    'task 1: Exited with exit code 1' names it; slurmstepd's STEP CANCELLED on task 0 is an echo."""
    lines = (LOGS / "slurm_task_dies.log").read_text().splitlines()
    r = diagnose_text("\n".join(ln for ln in lines if not ln.startswith("1: ")))
    assert r["first_failure"]["rank"] == 1 and r["first_failure"]["seen_by"] == "agent"
    # under `srun torchrun ...` a task is a node: srun's task ids are not ranks there
    torchrun = "\n".join(ln for ln in lines if not ln.startswith("1: ")) + \
        "\ntorch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
    assert (diagnose_text(torchrun)["first_failure"] or {}).get("rank") is None


def test_deepspeed_launcher_exit_line_names_no_rank():
    """DeepSpeed's launcher prints `{cmd} exits with return code = N` with the command of the LAST process it
    started (a variable left over from its spawn loop), whichever process failed: its --local_rank is no rank.
    Lines: https://github.com/deepspeedai/DeepSpeedExamples/issues/626 (deepspeed --num_gpus 2)."""
    log = textwrap.dedent("""\
        [2023-07-10 04:26:05,876] [INFO] [launch.py:318:sigkill_handler] Killing subprocess 94984
        [2023-07-10 04:26:05,876] [INFO] [launch.py:318:sigkill_handler] Killing subprocess 94985
        [2023-07-10 04:26:35,999] [ERROR] [launch.py:324:sigkill_handler] ['/global/D1/homes/sushant/sushanta/venv/bin/python3.10', '-u', 'trainCLM.py', '--local_rank=1', '--deepspeed', '/home/sushant/D1/sushanta/try/nepaligpt/clm/config/deepspeed_config.json'] exits with return code = -11
        """)
    assert (diagnose_text(log)["first_failure"] or {}).get("rank") is None


def test_mpirun_signal_line_names_the_killed_rank():
    """Open MPI's mpirun reports a rank killed by a signal with its MPI_COMM_WORLD rank (a global rank): that rank
    is the first failure, seen by the launcher, and SIGKILL names oom_one_rank. Line:
    https://github.com/open-mpi/ompi/issues/2661 (a rank needing more memory than its node had)."""
    log = "mpirun noticed that process rank 0 with PID 21183 on node host01 exited on signal 9 (Killed).\n"
    r = diagnose_text(log)
    assert r["first_failure"]["rank"] == 0 and r["causes"][0]["id"] == "oom_one_rank", r["first_failure"]
    r = diagnose_text(log.replace("rank 0 ", "rank 3 "))
    assert r["first_failure"]["rank"] == 3, r["first_failure"]


def test_agent_failed_line_names_no_rank_whose_log_only_echoes():
    """tests/data/logs/gen_sigkill_rank1.log cut before torchrun's table: 'failed (exitcode: 1) local_rank: 0'
    names rank 0, whose own lines only echo rank 1's death (gloo 'Connection closed by peer')."""
    lines = (LOGS / "gen_sigkill_rank1.log").read_text().splitlines()
    cut = lines[:next(i for i, ln in enumerate(lines) if "local_rank: 0 (pid" in ln) + 1]
    assert (diagnose_text("\n".join(cut))["first_failure"] or {}).get("rank") is None


def test_a_long_traceback_keeps_its_exception_line() -> None:
    """A 90-line Inductor traceback (real, from the lent H200) fills an event's line budget long before its
    exception line: the first failure still shows that line, not a `raise ...` source line of a frame."""
    report = diagnose_paths([LOGS / "gpu_compile_no_cc.log"])
    first = report["first_failure"]
    assert first["text"].startswith("torch._inductor.exc.InductorError: FileNotFoundError"), first
    assert report["causes"][0]["id"] == "compile_toolchain"


@pytest.mark.parametrize("head, indent", [
    (b"    Traceback (most recent call last):\n      File \"x.py\", line 1, in <module>\n    RuntimeError: x\n", "    "),
    (b"\tline one\r\n\n\t  line two\r\n", "\t"),
    (b"  File \"x.py\", line 1, in <module>\nRuntimeError: x\n", ""),  # a traceback cut above its header
    (b"", ""),
])
def test_common_indent(head, indent):
    assert common_indent(head) == indent


def test_composer_launcher_line_names_the_rank_it_found_dead():
    """MosaicML Composer's launcher logs `Rank N crashed with exit code C.` for the first rank it finds dead (a
    global rank): that rank is the first failure, seen by the launcher. Line:
    https://github.com/mosaicml/diffusion/issues/140 (a segfault, -11, with no other error printed)."""
    log = "ERROR:composer.cli.launcher:Rank 0 crashed with exit code -11.\n"
    r = diagnose_text(log)
    assert r["first_failure"]["rank"] == 0 and "launcher's summary names rank 0" in r["next_step"], r["first_failure"]
    r = diagnose_text(log.replace("Rank 0 ", "Rank 5 "))
    assert r["first_failure"]["rank"] == 5, r["first_failure"]
