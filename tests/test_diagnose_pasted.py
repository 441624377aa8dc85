"""A log as people paste or save it reads as the log printed: quoted in an issue ("> "), copied from a web page
(non-breaking spaces), scraped from HTML (entities), typed outside a forum's code block (typographer quotes and
dashes), or written by Windows PowerShell (UTF-16). Each case is a real log of tests/data/logs, changed the way a
paste changes it; the plain file is the reference."""

import gzip
import html
import json
import subprocess
import sys

import pytest
import yaml

from distdoctor.diagnose import diagnose_paths
from distdoctor.diagnose.prefixes import common_indent
from distdoctor.diagnose.sources import _unpaste
from distdoctor.evals.pasted import PASTES, answer as _answer, quote as _quote, measure
from distdoctor.paths import ROOT

LOGS = ROOT / "tests" / "data" / "logs"


# real logs each paste broke before (cause or first failing rank lost): tests/data/logs/<name>.log
CASES = [("gen_chain_oom_rank1", "html"), ("gen_chain_oom_rank1", "typographer"), ("gen_chain_oom_rank1", "nbsp"),
         ("field_olmo_connection_closed", "quote"), ("field_olmo_connection_closed", "nbsp"),
         ("gen_exit_code_rank2_prefix", "quote"), ("gen_launcher_endpoint_no_port", "typographer")]


@pytest.mark.parametrize("name,paste", CASES)
def test_pasted_log_reads_as_printed(tmp_path, name, paste):
    plain = diagnose_paths([str(LOGS / f"{name}.log")])
    meta = yaml.safe_load((LOGS / f"{name}.meta.yaml").read_text())
    assert plain["causes"][0]["id"] == meta["expected_cause"]
    assert (plain.get("first_failure") or {}).get("rank") == meta.get("first_failure_rank")
    changed = tmp_path / f"{name}.log"
    changed.write_text(PASTES[paste]((LOGS / f"{name}.log").read_text(encoding="utf-8")), encoding="utf-8")
    assert _answer(diagnose_paths([str(changed)])) == _answer(plain)


def test_pasted_log_through_gzip_and_stdin(tmp_path):
    """The same reading for a .gz file and standard input (every source is streamed the same way)."""
    text = html.escape(_quote((LOGS / "gen_chain_oom_rank1.log").read_text(encoding="utf-8")))
    gz = tmp_path / "pasted.log.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    plain = _answer(diagnose_paths([str(LOGS / "gen_chain_oom_rank1.log")]))
    assert _answer(diagnose_paths([str(gz)])) == plain
    out = subprocess.run([sys.executable, "-m", "distdoctor", "diagnose", "--json", "--quiet", "-"], input=text,
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert _answer(json.loads(out.stdout)) == plain


@pytest.mark.parametrize("chunk,expected", [
    (b"File &quot;train.py&quot;, line 3, in &lt;module&gt;\n", b'File "train.py", line 3, in <module>\n'),
    (b"a &amp;lt; b, it&#39;s\n", b"a &lt; b, it's\n"),  # &amp; decoded last: one level of escaping only
    ("torchrun \u2013nproc_per_node=2 \u201ctrain.py\u201d\u00a0x\n".encode(), b'torchrun --nproc_per_node=2 "train.py" x\n'),
    (b"AT&T 5 & 6\n", b"AT&T 5 & 6\n"),  # an ampersand that starts no entity stays
])
def test_unpaste(chunk, expected):
    out = _unpaste(chunk)
    assert out == expected and out.count(b"\n") == chunk.count(b"\n") and len(out) <= len(chunk)


@pytest.mark.parametrize("head,lead", [
    (b"> Traceback (most recent call last):\n>\n>   File \"x.py\", line 1\n> RuntimeError: x\n", "> "),
    (b"> > [rank1]: x\n> > y\n", "> > "),
    (b"    Traceback\n      File\n", "    "),
    (b">>> import torch\nRuntimeError: x\n", ""),  # an interpreter prompt at the margin is the log's own text
    (b"> quoted\nnot quoted\n", ""),
])
def test_common_lead(head, lead):
    assert common_indent(head) == lead


@pytest.mark.parametrize("encoding,gz", [("utf-16", False), ("utf-16-le", False), ("utf-16-be", False),
                                         ("utf-16", True)])
def test_utf16_log_reads_as_utf8(tmp_path, encoding, gz):
    """Windows PowerShell's `>` writes UTF-16 (with a byte-order mark): read as the text, not refused as binary."""
    text = (LOGS / "gen_chain_oom_rank1.log").read_text(encoding="utf-8").replace("\n", "\r\n")
    data = text.encode(encoding)
    path = tmp_path / ("log.txt.gz" if gz else "log.txt")
    path.write_bytes(gzip.compress(data) if gz else data)
    result = diagnose_paths([str(path)])
    assert not result["input_error"]
    assert _answer(result) == _answer(diagnose_paths([str(LOGS / "gen_chain_oom_rank1.log")]))


def test_utf16_on_stdin():
    text = (LOGS / "gen_exit_code_rank2_prefix.log").read_text(encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "distdoctor", "diagnose", "--json", "--quiet", "-"],
                         input=text.encode("utf-16"), capture_output=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert _answer(json.loads(out.stdout)) == _answer(diagnose_paths([str(LOGS / "gen_exit_code_rank2_prefix.log")]))


@pytest.mark.parametrize("head,encoding", [
    (b"\xff\xfeT\x00r\x00", "utf-16"), (b"\xfe\xff\x00T\x00r", "utf-16"),
    ("Traceback (most recent call".encode("utf-16-le"), "utf-16-le"),
    ("Traceback (most recent call".encode("utf-16-be"), "utf-16-be"),
    (b"Traceback (most recent call last):\n", None),
    (b"\x00\x01\x02\x03" * 16, None),  # binary: refused elsewhere, never decoded as text
])
def test_utf16_detection(head, encoding):
    from distdoctor.diagnose.sources import _utf16_encoding
    assert _utf16_encoding(head) == encoding


def test_every_labelled_log_reads_alike_quoted():
    """The eval over every short labelled log (python -m distdoctor.evals.pasted): quoted, each one's answer (top
    three, verdict, first failure's rank and line) is the plain file's (before quote marks were peeled: 163/202)."""
    out = measure(["quote"])
    assert out["logs"] >= 150 and out["kinds"]["quote"]["changed"] == []
    assert out["kinds"]["quote"]["cause_right"] == out["plain_cause_right"]
