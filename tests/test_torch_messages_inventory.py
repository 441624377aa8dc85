"""The inventory of torch's distributed messages (distdoctor.evals.torch_messages): a small torch-shaped folder with
real Python source (read with libcst, never imported) and a binary with C++ strings stands in for an installed torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from distdoctor.evals import torch_messages as tm

SOURCE = '''
import logging, warnings
logger = logging.getLogger(__name__)

def f(port, host, n):
    if port is None:
        raise ValueError(f"port is missing in endpoint: {host}. Try to specify --master-port")
    if n:
        raise RuntimeError("Distributed package doesn't have " + "NCCL built in")
    warnings.warn("Set timeout is now only supported for either nccl or gloo.")
    logger.error("failed (exitcode: %s) local_rank: %s", n, port)
    raise TypeError("group {} of {}".format(host, n))
'''


def _fake_torch(tmp_path: Path) -> Path:
    root = tmp_path / "torch"
    (root / "distributed" / "launcher").mkdir(parents=True)
    (root / "distributed" / "launcher" / "api.py").write_text(SOURCE)
    (root / "lib").mkdir()
    (root / "lib" / "libtorch_cpu.so").write_bytes(
        b"\x00\x01ELF\x00The client socket has timed out after %dms while trying to connect\x00"
        b"x.isTensor() INTERNAL ASSERT FAILED at c10d/reducer.cpp\x00unrelated text about matrices here\x00")
    return root


def test_python_messages_are_templates_with_fields(tmp_path):
    msgs = tm.python_messages(_fake_torch(tmp_path))
    got = {(m.kind, m.template) for m in msgs}
    assert ("ValueError", "port is missing in endpoint: {}. Try to specify --master-port") in got
    assert ("RuntimeError", "Distributed package doesn't have NCCL built in") in got
    assert ("warn", "Set timeout is now only supported for either nccl or gloo.") in got
    assert ("logger.error", "failed (exitcode: {}) local_rank: {}") in got  # the logger's lazy %s fields
    assert ("TypeError", "group {} of {}") in got
    assert all(m.where.startswith("torch/distributed/launcher/api.py:") for m in msgs)


def test_cxx_messages_keep_c10d_text_only(tmp_path):
    msgs = tm.cxx_messages(_fake_torch(tmp_path))
    assert [m.template for m in msgs] == ["The client socket has timed out after {}ms while trying to connect"]


def test_coverage_matches_known_messages(tmp_path):
    rows = tm.coverage(tm.python_messages(_fake_torch(tmp_path)))
    by_text = {r["template"]: r for r in rows}
    nccl = by_text["Distributed package doesn't have NCCL built in"]
    assert nccl["signatures"] and nccl["diagnosis"][0] == "nccl_without_cuda"
    port = by_text["port is missing in endpoint: {}. Try to specify --master-port"]
    assert port["line"] == "ValueError: port is missing in endpoint: 1. Try to specify --master-port"
    assert port["diagnosis"][0] == "launcher_args"


def test_cli_prints_json_and_rejects_a_bad_root(tmp_path):
    root = _fake_torch(tmp_path)
    out = subprocess.run([sys.executable, "-m", "distdoctor.evals.torch_messages", "--torch-root", str(root)],
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["count"] == 6
    bad = subprocess.run([sys.executable, "-m", "distdoctor.evals.torch_messages", "--torch-root", str(tmp_path)],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stdout == "" and len(bad.stderr.strip().splitlines()) == 1
    empty = tmp_path / "no_references"
    empty.mkdir()
    bad = subprocess.run([sys.executable, "-m", "distdoctor.evals.torch_messages", "--torch-root", str(root),
                          "--coverage", "--references", str(empty)], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stdout == "" and len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def test_strings_taken_elsewhere_go_through_the_same_filter(tmp_path):
    """A library's strings listed on another machine (libtorch_cuda.so on a GPU host) are read as the local ones."""
    listing = tmp_path / "cuda_strings.txt"
    listing.write_text("Cannot use ReduceOp.BAND with NCCL\nProcessGroupNCCL::allreduce(Tensor x, int y,\n"
                       "Cannot use ReduceOp.BAND with NCCL\nx.size() INTERNAL ASSERT FAILED at ProcessGroupNCCL.cpp\n")
    out = subprocess.run([sys.executable, "-m", "distdoctor.evals.torch_messages", "--strings", str(listing),
                          "--strings-name", "libtorch_cuda.so", "--coverage"], capture_output=True, text=True, check=True)
    report = json.loads(out.stdout)
    assert report["summary"]["messages"] == 1 and report["summary"]["covered"] == 1
    assert report["rows"][0]["where"] == "libtorch_cuda.so"
    assert report["rows"][0]["diagnosis"][0] == "backend_missing_collective"
