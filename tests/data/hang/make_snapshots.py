"""Re-create the snapshots in this folder from real hangs: each hang program runs under torchrun (gloo, CPU),
`hang.py --collect` takes its snapshot once it is stuck, and the job is killed. File paths are stored relative
to the repository root. Usage: python tests/data/hang/make_snapshots.py [NAME...]"""
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from distdoctor.hang import jobs  # noqa: E402
from distdoctor.hang.programs import ALL  # noqa: E402

HERE = Path(__file__).resolve().parent


def relative(text: str) -> str:
    return text.replace(str(ROOT) + "/", "")


def main(names: list[str]) -> None:
    for case in ALL:
        if names and case.name not in names:
            continue
        tmp = Path(tempfile.mkdtemp(prefix="hangsnap_"))
        env = {"TORCH_FR_DUMP_TEMP_FILE": str(tmp / "trace_")} if case.flight_recorder else {}
        job = jobs.start(case.program, case.nproc, env, log_dir=tmp,
                         stdin_open=case.stdin_open)
        try:
            snap = jobs.wait_stuck(job, 120, fr_ranks=case.nproc if case.flight_recorder else 0, in_init=case.in_init,
                                   fr_prefix=env.get("TORCH_FR_DUMP_TEMP_FILE"))
            snap = jobs.collect(job.pid)
        finally:
            left = job.kill()
        assert not left, left
        (HERE / f"{case.name}.json").write_text(relative(json.dumps(snap.to_json(), indent=1)) + "\n")
        if case.flight_recorder:
            traces = HERE / f"{case.name}.fr"
            shutil.rmtree(traces, ignore_errors=True)
            traces.mkdir()
            for f in tmp.glob("trace_*"):
                shutil.copy(f, traces / f.name)
        shutil.rmtree(tmp, ignore_errors=True)
        print(f"{case.name}: {len(snap.ranks)} ranks", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
