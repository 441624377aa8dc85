"""Re-create tests/data/repo_logs: real logs of the checker's example programs (evals/programs/check_*.py).

Each program is run for real here (torchrun, 2 ranks, gloo on CPU; the programs set 3 s group timeouts) and
its combined output written as `<program>.log` beside a `.meta.yaml` (the command, the program's cause as its
docstring states it). They pair a log with the code that produced it for `diagnose LOG --repo PROGRAM`
(distdoctor/evals/repo_evidence.py); they are kept apart from tests/data/logs, whose cases the log-only
evals score. Usage: python tests/data/make_repo_logs.py [NAME ...]   (about 1.5 minutes on 2 cores)
"""

from __future__ import annotations

import shlex
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

import yaml  # noqa: E402

from distdoctor.paths import ROOT  # noqa: E402
from distdoctor.runner import run, torchrun_cmd  # noqa: E402

OUT = ROOT / "tests" / "data" / "repo_logs"
# program (evals/programs/<name>.py) -> the cause its docstring names
PROGRAMS = {
    "check_forward_skips_params": "unused_parameters",
    "check_irecv_not_waited": "p2p_not_waited",
    "check_nan_skip": "rank_conditional_collective",
    "check_per_rank_seed": "model_differs_across_ranks",
    "check_rank0_eval_collective": "rank_conditional_collective",
    "check_sampler_no_set_epoch": "sampler_set_epoch_missing",
    "check_save_all_ranks": "checkpoint_all_ranks",
    "check_uneven_shards": "dataloader_uneven",
}


OUT_DIR_ARG = {"check_save_all_ranks"}  # programs that take a folder to write into (never the checkout)


def produce(name: str) -> str:
    import torch

    program = f"evals/programs/{name}.py"
    with tempfile.TemporaryDirectory() as tmp:
        cmd = torchrun_cmd(program, 2, [tmp] if name in OUT_DIR_ARG else [])
        result = run(cmd, timeout=90, cwd=ROOT)
        shown = shlex.join(["python", *cmd[1:]]).replace(tmp, "OUTDIR")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{name}.log").write_text(result.output, encoding="utf-8")
    meta = {"source": f"produced here: {shown}, torch {torch.__version__}, gloo",
            "expected_cause": PROGRAMS[name], "first_failure_rank": None, "program": program}
    (OUT / f"{name}.meta.yaml").write_text(yaml.safe_dump(meta, sort_keys=False, width=100), encoding="utf-8")
    return f"{name}: rc={result.returncode}, {len(result.output.splitlines())} lines"


def main(argv: list[str]) -> int:
    unknown = [n for n in argv if n not in PROGRAMS]
    if unknown:
        print(f"make_repo_logs.py: unknown program(s) {', '.join(unknown)}", file=sys.stderr)
        return 2
    for name in argv or PROGRAMS:
        print(produce(name), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
