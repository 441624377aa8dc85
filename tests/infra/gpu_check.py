"""GPU-side checks, run by hand on a CUDA machine; no test or CI step depends on them.

Two jobs:
1. Patched programs keep their GPU path: the programs the CPU tests patch and run on gloo are patched
   here (`prepare`, needs libcst) and then run on a GPU (`run`) beside the unpatched original: on a GPU
   the patched copy must do what the original does (finish or fail alike, the same process-group backend,
   CUDA memory used alike). The fixtures are CPU-test programs: some use gloo or fail on a GPU by design.
2. Real CUDA/NCCL failure text from the torch on that machine: small broken programs (`gpu_programs/`),
   each run under torchrun; every log is saved with the command that made it.

    python tests/infra/gpu_check.py prepare DIR        # here: patched copies of the programs in DIR
    python tests/infra/gpu_check.py run DIR OUT        # there: OUT/summary.json, OUT/<name>.log
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
from distdoctor.runner import run_torchrun  # noqa: E402  (stdlib only: runs where libcst is absent)
PROGRAMS = HERE / "gpu_programs"

# (fixture or program, script args) that the CPU tests patch and run on 2 gloo ranks
PATCHED = [
    *(f"tests/fixtures/patches/{name}.in.py" for name in (
        "torch_device_cpu/setup_helper_device", "torch_device_cpu/device_string_forms",
        "torch_device_cpu/accelerator_api", "local_rank_device/env_dict_call_graph",
        "local_rank_device/environ_copy_argparse_config", "cuda_calls_cpu/train_loop_bare_cuda",
        "gloo_backend/platform_chain_then_set_device", "gloo_backend/platform_ifexp_backend",
        "int_device/device_keyword_any_call", "gloo_backend/setup_beside_try",
        "cuda_requirements/count_name_modulo", "gloo_backend/default_backend_device_id",
        "gloo_backend/launcher_backend_param", "cuda_calls_cpu/bare_set_device",
        "int_device/device_modulo_count", "cuda_calls_cpu/legacy_cuda_tensor_types")),
    "evals/programs/backend_nanogpt.py", "evals/programs/backend_nanochat.py",
    "evals/programs/backend_ddp_tutorial.py", "examples/broken_ddp/train.py",
]

# name, nproc, extra environment, what the run should show (a substring of its output)
FAILURES = [
    ("more_ranks_than_gpus", 2, {}, "invalid device ordinal"),
    ("two_ranks_one_gpu_nccl", 2, {"NCCL_DEBUG": "WARN"}, "Duplicate GPU detected"),
    ("cpu_tensor_nccl_group", 1, {}, "No backend type associated with device type cpu"),
    ("oom_rank0", 2, {}, "CUDA out of memory"),
    ("cuda_then_fork", 1, {}, "Cannot re-initialize CUDA in forked subprocess"),
    ("nccl_gpus_hidden", 1, {"CUDA_VISIBLE_DEVICES": ""}, "no GPUs found"),
    ("nccl_ifname_missing", 1, {"NCCL_SOCKET_IFNAME": "ib_missing0", "NCCL_DEBUG": "WARN"}, "NCCL"),
    ("compile_no_cc", 1, {"CC": "/nonexistent/cc", "TORCHINDUCTOR_CACHE_DIR": "/tmp/gpucheck_inductor"}, "cc"),
    ("device_id_out_of_range", 2, {}, "out of range"),
    ("batch_left_on_cpu", 1, {}, "same device"),
    ("ddp_model_on_cpu", 1, {}, "device_ids"),
    ("device_assert_rank1", 2, {}, "device-side assert"),
    ("fsdp_module_cpu_and_gpu", 1, {}, "both CPU and GPU params"),
    ("fsdp_module_meta_and_gpu", 1, {}, "single device modules"),
    ("monitored_barrier_nccl", 1, {}, "only implemented for GLOO"),
    ("device_id_no_index", 1, {}, "device_id with index"),
    ("fsdp_sync_module_states_cpu", 1, {}, "sync_module_states"),
]

# Loaded in every Python process of a `run` through PYTHONPATH: records the process group's backend and
# the CUDA memory a rank used, printed at exit as one GPUCHECK line per rank.
HOOK = textwrap.dedent('''\
    import atexit, json, os
    if "LOCAL_RANK" in os.environ:
        import torch, torch.distributed as dist
        _seen = {}
        _init = dist.init_process_group
        def _recording_init(*args, **kwargs):
            out = _init(*args, **kwargs)
            _seen["backend"] = str(dist.get_backend())
            return out
        dist.init_process_group = _recording_init
        def _report():
            used = torch.cuda.max_memory_allocated() if torch.cuda.is_initialized() else 0
            print("GPUCHECK " + json.dumps({"rank": os.environ.get("RANK"), "backend": _seen.get("backend"),
                                            "cuda_bytes": used}), flush=True)
        atexit.register(_report)
''')


def _flat_name(rel: str) -> str:
    return rel.replace("tests/fixtures/patches/", "").replace("/", "__").replace(".in.py", ".py")


def prepare(out: Path) -> int:
    """Copy the programs into `out` and patch them there with every patch, as a user would."""
    out.mkdir(parents=True, exist_ok=True)
    for rel in PATCHED:
        shutil.copy(ROOT / rel, out / _flat_name(rel))
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "patch_backend.py"), str(out), "--quiet"],
                          capture_output=True, text=True)
    (out / "patch.txt").write_text(done.stdout + done.stderr)
    print(f"patched {len(PATCHED)} programs into {out} (exit {done.returncode})")
    return done.returncode


def _torchrun(script: Path, nproc: int, env: dict[str, str], cwd: Path, timeout: float) -> tuple[str, int, float]:
    """(output, exit code or 124 on timeout, seconds): the project's runner, which kills every rank on timeout."""
    start = time.monotonic()
    res = run_torchrun(script, nproc, timeout=timeout, cwd=cwd, env=env)
    return res.output, 124 if res.timed_out else res.returncode, time.monotonic() - start


def _header(cmd: str, env: dict[str, str]) -> str:
    import torch
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    env_text = " ".join(f"{k}={v!r}" for k, v in env.items())
    return f"# {env_text + ' ' if env_text else ''}{cmd}\n# torch {torch.__version__}, {gpu}\n"


def _outcome(script: Path, hook_dir: Path, cwd: Path, timeout: float) -> dict:
    """One rank of `script` on the GPU: exit, finished, the backend and CUDA memory each rank reported."""
    text, code, secs = _torchrun(script, 1, {"PYTHONPATH": str(hook_dir)}, cwd, timeout)
    reports = [json.loads(line.split("GPUCHECK ", 1)[1]) for line in text.splitlines() if "GPUCHECK " in line]
    return {"exit": code, "finished": code == 0 and "DISTDOCTOR_OK rank=0" in text,
            "backend": sorted({str(r["backend"]) for r in reports}),
            "cuda_used": bool(reports) and all(r["cuda_bytes"] > 0 for r in reports),
            "seconds": round(secs, 1), "text": text}


def _check_patched(rel: str, prepared: Path, hook_dir: Path, out: Path, timeout: float) -> dict:
    """The patched copy must do on the GPU what the original does: finish (or fail) alike, same backend,
    CUDA memory used alike."""
    originals = out.parent / "gpucheck_originals"
    originals.mkdir(exist_ok=True)
    original = originals / _flat_name(rel)
    shutil.copy(ROOT / rel, original)
    before = _outcome(original, hook_dir, originals, timeout)
    after = _outcome(prepared / _flat_name(rel), hook_dir, prepared, timeout)
    keys = ("finished", "backend", "cuda_used")
    kept = all(before[k] == after[k] for k in keys)
    if not kept or not after["finished"]:
        (out / f"patched_{_flat_name(rel)[:-3]}.log").write_text(
            "# original\n" + before["text"] + "\n# patched\n" + after["text"])
    for side in (before, after):
        side.pop("text")
    return {"kept": kept, "original": before, "patched": after}


def run(prepared: Path, out: Path, timeout: float, jobs: int, only: str | None) -> int:
    """Run each program before and after its patch (1 rank, on the GPU) and the failure programs."""
    from concurrent.futures import ThreadPoolExecutor

    out.mkdir(parents=True, exist_ok=True)
    hook_dir = out.parent / "gpucheck_hook"
    hook_dir.mkdir(exist_ok=True)
    (hook_dir / "sitecustomize.py").write_text(HOOK)
    summary: dict[str, dict] = {"patched": {}, "failures": {}}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        if only in (None, "patched"):
            checks = {rel: pool.submit(_check_patched, rel, prepared, hook_dir, out, timeout) for rel in PATCHED}
            for rel, future in checks.items():
                summary["patched"][rel] = res = future.result()
                print(f"patched {rel}: kept {res['kept']} original {res['original']} patched {res['patched']}",
                      flush=True)
        if only in (None, "failures"):
            runs = {name: pool.submit(_torchrun, PROGRAMS / f"{name}.py", nproc, dict(env), PROGRAMS, timeout)
                    for name, nproc, env, _ in FAILURES}
            for name, nproc, env, expect in FAILURES:
                text, code, secs = runs[name].result()
                cmd = (f"python -m torch.distributed.run --standalone --nproc_per_node={nproc} "
                       f"tests/infra/gpu_programs/{name}.py")
                (out / f"{name}.log").write_text(_header(cmd, env) + text)
                shown = bool(expect) and expect in text
                summary["failures"][name] = {"exit": code, "shows": shown, "expect": expect, "seconds": round(secs, 1)}
                print(f"failure {name}: exit {code} shows {expect!r}: {shown} ({secs:.0f} s)", flush=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    bad = [k for k, v in summary["patched"].items() if not v["kept"]]
    print(f"{len(summary['patched']) - len(bad)}/{len(summary['patched'])} patched programs behave on the GPU as "
          f"their originals do", flush=True)
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("prepare", help="patch copies of the programs into DIR (here, needs libcst)")
    p.add_argument("dir", type=Path)
    r = sub.add_parser("run", help="run them and the failure programs on a GPU machine")
    r.add_argument("dir", type=Path)
    r.add_argument("out", type=Path)
    r.add_argument("--timeout", type=float, default=120.0, help="seconds per torchrun job (default 120)")
    r.add_argument("--jobs", type=int, default=4, help="torchrun jobs at once (default 4)")
    r.add_argument("--only", choices=("patched", "failures"), help="run one of the two checks")
    args = parser.parse_args(argv)
    if args.step == "prepare":
        return prepare(args.dir)
    if not args.dir.is_dir():
        parser.error(f"{args.dir}: no such folder (make it with `prepare`)")
    return run(args.dir.resolve(), args.out.resolve(), args.timeout, args.jobs, args.only)


if __name__ == "__main__":
    sys.exit(main())
