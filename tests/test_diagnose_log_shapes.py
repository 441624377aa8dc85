"""First failing rank and cause on log shapes that wrap or split what torch prints: a `logging` handler's
logger.exception (its header on the line before the traceback), JSON lines, grep -r over per-rank files,
tail -n +1 headers, srun's per-task files and its report of a killed task, chained exceptions, warning noise, a
DataLoader worker's error. Logs: real runs here (tests/data/logs/<name>.meta.yaml says how each was made) and a
live torchrun run of evals/programs/fail_rank_shapes.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from distdoctor.diagnose import diagnose_paths, diagnose_text
from distdoctor.diagnose.engine import KILLED
from distdoctor.diagnose.json_lines import unwrap
from distdoctor.diagnose.prefixes import peel_prefix
from distdoctor.runner import run_torchrun

LOGS = Path(__file__).resolve().parent / "data" / "logs"
PROGRAMS = Path(__file__).resolve().parent.parent / "evals" / "programs"
SHAPES = ["gen_logging_handler_raise2", "gen_jsonl_raise2", "gen_chain_oom_rank1", "gen_during_oom_rank1",
          "gen_warnings_noise_raise2", "gen_dataloader_caught_raise1", "gen_tail_rank_files_raise2",
          "gen_grep_rank_files_raise2", "gen_srun_out_files_raise2", "gen_srun_label_kill1",
          "gen_docker_json_raise2", "gen_tail_two_nodes_raise3", "gen_logging_chain_oom_rank1"]


@pytest.mark.parametrize("name", SHAPES)
def test_cause_and_first_rank_of_each_shape(name):
    """The top cause and the first rank are the ones the meta wrote down before the log was first diagnosed."""
    meta = yaml.safe_load((LOGS / f"{name}.meta.yaml").read_text(encoding="utf-8"))
    got = diagnose_paths([str(LOGS / f"{name}.log")])
    assert got["causes"][0]["id"] == meta["expected_cause"], got["causes"][:3]
    assert got["first_failure"]["rank"] == meta["first_failure_rank"], got["first_failure"]


def test_logger_exception_header_joins_its_traceback():
    """Each rank's '- ERROR - rank N: training failed' header is one failure with the traceback under it: the
    echoing ranks' headers are echoes (not three copies of one failure), rank 2's names its ValueError."""
    ff = diagnose_paths([str(LOGS / "gen_logging_handler_raise2.log")])["first_failure"]
    assert ff["rank"] == 2 and ff["text"].startswith("ValueError: bad batch"), ff
    assert not ff.get("all_ranks"), ff


def test_a_header_not_just_before_the_traceback_stays_its_own_line():
    """With another line between the ERROR header and the traceback, the header is not taken as its record:
    the three headers are copies of one failure again and no rank is named (never a wrong one)."""
    lines = (LOGS / "gen_logging_handler_raise2.log").read_text(encoding="utf-8").splitlines()
    info = next(ln for ln in lines if " - INFO - " in ln)
    spaced = []
    for ln in lines:
        spaced.append(ln)
        if " - ERROR - " in ln:
            spaced.append(info)
    ff = diagnose_text("\n".join(spaced))["first_failure"]
    assert ff["rank"] in (None, 2), ff
    assert ff["rank"] is None or "ValueError" in ff["text"], ff


@pytest.mark.parametrize("line,rank,body", [
    ("logs/rank_2.log:[rank2]: ValueError: x", 2, " ValueError: x"),
    ('logs/rank_1.log:  File "a.py", line 3, in f', 1, '  File "a.py", line 3, in f'),
    ("out/12_1.out:37:Traceback (most recent call last):", None, "Traceback (most recent call last):"),
    ("logs/node1.log:[rank3]: RuntimeError: y", 3, " RuntimeError: y"),
])
def test_grep_path_prefix_is_peeled(line, rank, body):
    """grep -r / -H / -n put the file (and line number) in front: peeled; the rank is the file name's rank_N, or
    the prefix behind it; a name without one (srun's %j_%t) names none."""
    got, _, _, rest, _ = peel_prefix(line)
    assert (got, rest) == (rank, body)


def test_grep_path_needs_a_log_file_name():
    """A source file's path (a warning's 'x.py:3:') or a bare file name with nothing after is not a grep prefix."""
    assert peel_prefix("logs/rank_3.log:")[0] is None
    assert peel_prefix("/x/y.so: undefined symbol: z")[3] == "/x/y.so: undefined symbol: z"


def test_srun_killed_task_is_a_kill_not_its_terminated_ones():
    """srun's 'task 1: Killed' (SIGKILL) is a rank killed with no word of its own; 'Terminated' is srun ending the
    others (--kill-on-bad-exit)."""
    text = (LOGS / "gen_srun_label_kill1.log").read_text(encoding="utf-8").splitlines()
    killed = [ln for ln in text if KILLED.search(ln)]
    assert len(killed) == 1 and killed[0].endswith(": task 1: Killed"), killed
    assert not any(KILLED.search(ln) for ln in text if ln.endswith("Terminated"))


def test_live_logging_handler_run_names_the_raising_rank():
    """A real torchrun run, every rank logging through a `logging` handler: rank 1 raises, the others log the
    lost peer. The first failure is rank 1's ValueError, one failure (not the same header on every rank). No line
    carries a rank, so only torchrun's summary can name it: rank 1 where the others were still running when the
    agent found it (SIGTERM), no rank where all three exited 1 before its check (a tie) -- never another rank."""
    res = run_torchrun(PROGRAMS / "fail_rank_shapes.py", nproc=3, timeout=90, launcher_args=["--monitor-interval=1"],
                       script_args=["--plan", "1:raise:0", "--log-style", "logging"])
    assert "- trainer - ERROR - rank 1: training failed" in res.output, res.output[-2000:]
    got = diagnose_text(res.output)
    ff = got["first_failure"]
    assert got["causes"][0]["id"] == "peer_died_first", got["causes"][:3]
    assert ff["text"].startswith("ValueError: bad batch") and not ff.get("all_ranks"), ff
    assert ff["rank"] == 1 or (ff["rank"] is None and "Signal 15 (SIGTERM)" not in res.output), ff


@pytest.mark.parametrize("name,text", [("gen_jsonl_raise2", "ValueError: bad batch"),
                                       ("gen_docker_json_raise2", "[rank2]: ValueError: bad batch")])
def test_json_lines_show_the_error_they_carry(name, text):
    """A JSON logger's record (the traceback in its exc_info field) and Docker's json-file lines: the first failure
    is the error line inside the object, not the agent's summary or a quoted source line."""
    ff = diagnose_paths([str(LOGS / f"{name}.log")])["first_failure"]
    assert ff["rank"] == 2 and ff["text"].startswith(text), ff


def test_unwrap_reads_text_rank_and_time_fields():
    """The first real record of rank 2's failure in gen_jsonl_raise2: its message, then its traceback's lines, each
    with the object's rank and time; a line that is no JSON object, or one without a text field, stays as it is."""
    line = next(ln for ln in (LOGS / "gen_jsonl_raise2.log").read_text(encoding="utf-8").splitlines()
                if '"rank": 2, "msg": "rank 2: training failed"' in ln)
    got = unwrap(line)
    assert got[0][:2] == ("rank 2: training failed", 2) and got[0][2][0] >= 2026
    assert got[1][0] == "Traceback (most recent call last):" and got[-1][0].startswith("ValueError: bad batch")
    assert unwrap("[rank2]: ValueError: x") is None
    assert unwrap('{"lr": 0.1, "epochs": 3}') is None
    assert unwrap('{"msg": "x", "rank": true}')[0][1] is None
