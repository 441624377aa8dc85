"""scripts/diagnose.py end to end: exit codes, stdin, folders, bad inputs, bounded memory, a real run."""

import gzip
import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, str(ROOT / "scripts" / "diagnose.py")]
LOGS = ROOT / "tests" / "data" / "logs"
FAIL = "[rank1]: ValueError: bad\n[rank0]: RuntimeError: [x/gloo/transport/tcp/pair.cc:553] Connection closed by peer [1.2.3.4]:5\n"


def run(*args, stdin=None):
    return subprocess.run(CLI + list(args), input=stdin, capture_output=True, timeout=120)


def test_help_and_usage():
    r = run("--help")
    assert r.returncode == 0 and b"exit codes" in r.stdout
    r = run()
    assert r.returncode == 2 and b"give at least one LOG" in r.stderr


def test_exit_codes_json_and_stdin(tmp_path):
    r = run("-", "--json", stdin=FAIL.encode())
    assert r.returncode == 0
    out = json.loads(r.stdout)
    assert out["causes"][0]["id"] == "peer_died_first"
    assert out["first_failure"]["rank"] == 1 and out["first_failure"]["file"] == "<stdin>"
    assert set(out["causes"][0]["evidence"][0]) >= {"file", "line", "text"}
    assert "patch" in out
    r = run("-", "--json", stdin=gzip.compress(FAIL.encode()))
    assert r.returncode == 0 and json.loads(r.stdout)["first_failure"]["rank"] == 1
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    r = run(str(empty))
    assert r.returncode == 1 and b"none of the knowledge base" in r.stdout
    r = run(str(tmp_path / "missing.log"), str(empty))
    assert r.returncode == 2 and b"missing.log: no such file or folder" in r.stderr


def test_context_flag():
    r = run("--context", "torchrun: error: unrecognized arguments: --local-rank=0", "--json")
    assert r.returncode == 0
    assert json.loads(r.stdout)["causes"][0]["id"] == "launcher_args"


def test_binary_invalid_utf8_gz_and_torchrun_logdir(tmp_path):
    binary = tmp_path / "core.bin"
    binary.write_bytes(b"\x7fELF\x00\x00\x01" * 1000)
    bad = tmp_path / "latin1.log"
    bad.write_bytes(b"caf\xe9 \xff\xfe\n[rank0]: RuntimeError: Expected all tensors to be on the same device, but found \xe9\xff\n")
    gz = tmp_path / "rank_3.log.gz"
    with gzip.open(gz, "wb") as f:
        f.write(b"ok\n")
    r = run(str(binary), str(bad), str(gz), "--json")
    assert r.returncode == 2
    assert b"core.bin: binary file" in r.stderr
    out = json.loads(r.stdout)
    assert out["causes"][0]["id"] == "device_mismatch" and out["stats"]["invalid_utf8"]
    r = run(str(LOGS / "gen_peer_died_logdir.d"), "--json")
    out = json.loads(r.stdout)
    assert r.returncode == 0 and out["first_failure"]["rank"] == 1
    assert out["first_failure"]["file"].endswith("attempt_0/1/stderr.log")


def _child_peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def test_huge_line_and_many_files_bounded_memory(tmp_path):
    """A 50 MB single line and a folder of 3000 files: no crash, bounded peak RSS of the process."""
    big = tmp_path / "one_line.log"
    with open(big, "wb") as f:
        f.write(b"[rank2]: RuntimeError: CUDA error: invalid device ordinal " + b"x" * (50 << 20) + b"\n")
        f.write(b"[rank0]: RuntimeError: [x/gloo/transport/tcp/pair.cc:553] Connection closed by peer [1.2.3.4]:5\n")
    many = tmp_path / "many"
    many.mkdir()
    for i in range(3000):
        (many / f"rank_{i}.log").write_text("step 1\n")
    (many / "rank_3001.log").write_text("[rank3001]: FileExistsError: [Errno 17] File exists: '/c'\n")
    os.symlink(tmp_path / "nowhere", many / "dangling.log")
    code = textwrap.dedent(f"""
        import resource, subprocess, sys
        r = subprocess.run({CLI!r} + sys.argv[1:], capture_output=True)
        sys.stdout.buffer.write(r.stdout); sys.stderr.buffer.write(r.stderr)
        print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024, file=sys.stderr)
        sys.exit(r.returncode)
        """)
    r = subprocess.run([sys.executable, "-c", code, str(big), "--json"], capture_output=True, timeout=120)
    out = json.loads(r.stdout)
    peak = int(r.stderr.decode().strip().splitlines()[-1])
    assert r.returncode == 0 and out["causes"][0]["id"] == "local_rank_device"
    assert out["first_failure"]["rank"] == 2 and out["stats"]["cut_lines"] == 1
    assert peak < 100, f"peak RSS {peak} MB"
    big.unlink()
    r = subprocess.run([sys.executable, "-c", code, str(many), "--json"], capture_output=True, timeout=120)
    out = json.loads(r.stdout)
    peak = int(r.stderr.decode().strip().splitlines()[-1])
    assert r.returncode == 0, r.stderr
    assert out["stats"]["files"] == 3001 and out["causes"][0]["id"] == "download_race"
    assert out["first_failure"]["rank"] == 3001
    assert b"dangling.log: broken symbolic link" in r.stderr
    assert peak < 100, f"peak RSS {peak} MB"
    noisy = tmp_path / "noisy.log"
    with open(noisy, "w") as f:
        for i in range(60000):
            f.write(f"[rank{i % 64}]: RuntimeError: transient failure {i} " + "y" * 400 + "\n")
    r = subprocess.run([sys.executable, "-c", code, str(noisy), "--json"], capture_output=True, timeout=120)
    out = json.loads(r.stdout)
    peak = int(r.stderr.decode().strip().splitlines()[-1])
    assert out["first_failure"]["line"] == 1 and out["stats"]["events_dropped"] > 0
    assert peak < 100, f"peak RSS {peak} MB with 60000 error events"
    noisy.unlink()


@pytest.mark.torchrun
def test_real_torchrun_failure_is_diagnosed(tmp_path):
    """A real 2-rank gloo job (torchrun --role trainer --tee 3 --log-dir) where rank 1 raises: the console
    ([trainer1]:[rank1]: prefixes) and the per-rank log folder both name rank 1 and its own error."""
    from distdoctor.runner import run_torchrun
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent("""
        from datetime import timedelta
        import torch, torch.distributed as dist
        dist.init_process_group("gloo", timeout=timedelta(seconds=3))
        rank = dist.get_rank()
        t = torch.ones(4)
        dist.all_reduce(t)
        if rank == 1:
            t.view(4, 3)
        dist.all_reduce(t)
        """))
    logdir = tmp_path / "logs"
    res = run_torchrun(script, nproc=2, timeout=60,
                       launcher_args=["--role", "trainer", "--tee", "3", "--log-dir", str(logdir)])
    log = tmp_path / "console.log"
    log.write_text(res.output)
    assert "[trainer1]:[rank1]:" in res.output
    for target in (log, logdir):
        r = run(str(target), "--json")
        out = json.loads(r.stdout)
        assert r.returncode == 0
        assert out["causes"][0]["id"] == "shape_config_error", res.output[-2000:]
        assert out["first_failure"]["rank"] == 1
        assert "is invalid for input of size" in out["first_failure"]["text"]


@pytest.mark.torchrun
@pytest.mark.parametrize("program,nproc,cause,rank", [
    ("fail_uneven_batches.py", 2, "dataloader_uneven", 1),      # gloo aborts the rank that left the loop first
    ("fail_monitored_barrier.py", 2, "collective_timeout", 0),  # the barrier names the late rank, not a reason
])
def test_real_collective_failures_are_diagnosed(tmp_path, program, nproc, cause, rank):
    """The corpus programs run again for real: the fresh output gets the cause its recorded log got."""
    from distdoctor.runner import run_torchrun
    res = run_torchrun(ROOT / "evals" / "programs" / program, nproc=nproc, timeout=90)
    assert res.returncode not in (0, None), res.output[-2000:]
    r = run("-", "--json", stdin=res.output.encode())
    out = json.loads(r.stdout)
    assert r.returncode == 0 and out["causes"][0]["id"] == cause, res.output[-3000:]
    if program == "fail_uneven_batches.py":
        # gloo either aborts on the size mismatch (rank 1 first) or every rank times out (no rank first)
        assert out["first_failure"]["rank"] in (rank, None)
        assert any(e["kind"] == "ranks differ" for e in out["causes"][0]["evidence"])
    else:
        assert out["first_failure"]["rank"] == rank


@pytest.mark.torchrun
def test_failing_code_line_gets_the_checker_finding(tmp_path):
    """From a real failure's log back to the code: the user frame of rank 0's traceback is the all_reduce under
    `if rank == 0`, and the report names the static checker's finding there (DD101)."""
    from distdoctor.runner import run_torchrun
    program = ROOT / "evals" / "programs" / "fail_rank0_allreduce.py"
    res = run_torchrun(program, nproc=2, script_args=["--then", "exit"], timeout=90)
    assert res.returncode not in (0, None), res.output[-2000:]
    log = tmp_path / "run.log"
    log.write_text(res.output)
    r = run(str(log), "--json")
    out = json.loads(r.stdout)
    assert out["causes"][0]["id"] == "rank_conditional_collective", res.output[-2000:]
    assert [(Path(f["path"]).name, f["code"]) for f in out["checker"]] == [("fail_rank0_allreduce.py", "DD101")]
    text = run(str(log)).stdout.decode()
    assert "Checker: " in text and "DD101" in text
    # from standard input the log cannot be read again: no checker line, the rest unchanged
    assert json.loads(run("-", "--json", stdin=res.output.encode()).stdout)["checker"] == []


def test_bad_knowledge_base_is_an_input_error(tmp_path):
    (tmp_path / "a.md").write_text("### port_in_use — x\n\n```yaml\ncause: port_in_use\npatch: null\n```\n")
    r = run("--references", str(tmp_path), "-", stdin=FAIL.encode())
    assert r.returncode == 2 and b"a.md:3" in r.stderr and b"related" in r.stderr
    r = run("--references", str(tmp_path / "none"), "-", stdin=FAIL.encode())
    assert r.returncode == 2 and b"no reference entries" in r.stderr


def test_compressed_logs_streamed_and_archives_refused(tmp_path):
    """A log compressed with bzip2 or xz is read as it streams (file or stdin), like .gz; a zip, 7-Zip or zstd
    file gets a one-line error saying what to run; random bytes with a few NULs are binary, not a log."""
    import bz2
    import lzma
    import random

    for name, data in (("rank1.log.bz2", bz2.compress(FAIL.encode())), ("rank1.log.xz", lzma.compress(FAIL.encode()))):
        path = tmp_path / name
        path.write_bytes(data)
        for r in (run(str(path), "--json"), run("-", "--json", stdin=data)):
            out = json.loads(r.stdout)
            assert r.returncode == 0 and out["first_failure"]["rank"] == 1
            assert out["causes"][0]["id"] == "peer_died_first"
    cut = tmp_path / "cut.log.xz"
    cut.write_bytes(lzma.compress(FAIL.encode())[:40])
    r = run(str(cut))
    assert r.returncode == 2 and b"cut.log.xz: cannot read:" in r.stderr
    noise = random.Random(0).randbytes(3000)
    assert 0 < noise.count(0) <= 30  # NULs, but under the 1% a stray NUL in a log may reach
    for name, data, why in (("logs.zip", b"PK\x03\x04" + b"\x00" * 60, b"logs.zip: a zip archive"),
                            ("logs.7z", b"7z\xbc\xaf\x27\x1c" + b"\x00" * 60, b"logs.7z: a 7-Zip archive"),
                            ("rank0.log.zst", b"\x28\xb5\x2f\xfd" + b"\x00" * 60, b"rank0.log.zst: zstd-compressed"),
                            ("noise.log", noise, b"noise.log: binary file")):
        path = tmp_path / name
        path.write_bytes(data)
        r = run(str(path))
        assert r.returncode == 2 and why in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
