"""The knowledge base covers the taxonomy, holds the field failures' real text, routes from SKILL.md in
two hops, and its signatures recognise what torch 2.13 really prints today."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from distdoctor import knowledge, paths
from distdoctor.diagnose.matcher import matcher_for
from distdoctor.runner import run_torchrun

TAXONOMY = paths.taxonomy_path()
needs_taxonomy = pytest.mark.skipif(TAXONOMY is None, reason="references/taxonomy.yaml not found")

# Issue 3, item 2: each field failure must be in its cause's entry with its real text.
FIELD_FAILURES = [
    ("peer_died_first", "Connection closed by peer"),
    ("shape_config_error", "shape '[4, 2048, -1, 75]' is invalid for input of size 6815744"),
    ("local_rank_device", "CUDA error: invalid device ordinal"),
    ("rank_conditional_collective", "Heartbeat monitor timed out"),
    ("device_mismatch", "Expected all tensors to be on the same device"),
    ("gloo_missing_feature", "Work::getFuture not implemented"),
    ("flash_attn_on_cpu", "Flash Attention 2 is not available on CPU"),
    ("launcher_args", "ambiguous option: --run could match --run-path"),
    ("compile_toolchain", "Dynamo is not supported on Python 3.12+"),
    ("compile_toolchain", "loop initial declarations are only allowed in C99 mode"),
    ("logger_init_all_ranks", "About to call WandbLogger constructor"),
    ("single_process_launch", "NCCL INFO Channel 00/0 : 1[1] -> 0[0]"),
]
# What the SKILL.md index row of each says, so a reader finds the row from the error (or behaviour).
SKILL_ROW_TEXT = {
    "peer_died_first": "Connection closed by peer",
    "shape_config_error": "is invalid for input of size 6815744",
    "local_rank_device": "invalid device ordinal",
    "rank_conditional_collective": "Heartbeat monitor timed out",
    "device_mismatch": "Expected all tensors to be on the same device",
    "gloo_missing_feature": "Work::getFuture not implemented",
    "flash_attn_on_cpu": "flash attention chosen on a CPU run",
    "launcher_args": "--run",
    "compile_toolchain": "C99 mode",
    "logger_init_all_ranks": "hang at logger construction",
    "single_process_launch": "all logs from GPU 0",
}


@needs_taxonomy
def test_every_cause_has_exactly_one_complete_entry():
    causes = knowledge.load_taxonomy()
    entries = knowledge.load_entries()
    ids = [e.cause for e in entries]
    assert sorted(ids) == sorted(causes), set(ids) ^ set(causes)
    for e in entries:
        for name in ("Symptom", "Root cause", "Fix", "Verify"):
            assert e.section(name), f"{e.cause}: empty **{name}**"
        assert "<a id=" not in e.prose, f"{e.cause}: the next entry's anchor leaked into the prose"
        assert e.quotes and all(q.source for q in e.quotes), e.cause
        assert e.patch == causes[e.cause]["patch"], e.cause
        assert e.anchor == f"references/{e.file.name}#{e.cause}"


def test_field_failures_are_quoted_in_their_entry():
    by_cause = knowledge.entries_by_cause()
    for cause, text in FIELD_FAILURES:
        quoted = "\n".join(q.text for q in by_cause[cause].quotes)
        assert text in quoted, f"{cause}: {text!r} not quoted"


def test_two_hops_from_skill_to_fix():
    """SKILL.md index row naming the error -> entry anchor -> the entry's Fix."""
    skill = paths.SKILL.read_text(encoding="utf-8")
    by_cause = knowledge.entries_by_cause()
    rows = [ln for ln in skill.splitlines() if ln.startswith("| ")]
    for cause, text in SKILL_ROW_TEXT.items():
        row = next((r for r in rows if text in r and f"#{cause})" in r), None)
        assert row is not None, f"no SKILL.md index row with {text!r} linking to {cause}"
        target = re.search(rf"\]\((references/[\w.-]+\.md)#{cause}\)", row).group(1)
        entry = by_cause[cause]
        assert paths.ROOT / target == entry.file
        assert entry.section("Fix")


def test_parse_file_collects_errors_and_keeps_good_entries(tmp_path: Path):
    md = tmp_path / "x.md"
    md.write_text(textwrap.dedent("""\
        ### port_in_use — bad block
        ```yaml
        cause: port_in_use
        patch: [unclosed
        ```
        ### peer_died_first — good block
        ```yaml
        cause: peer_died_first
        patch: null
        related: []
        verify: "rerun"
        signatures:
          - {regex: "Connection closed by peer", proves: "a peer died", kind: echo}
        ```
        **Symptom**

        Source: produced here: test, torch 2.13.0+cpu
        ```text
        Connection closed by peer
        ```
        """), encoding="utf-8")
    errors: list[knowledge.KnowledgeError] = []
    entries = knowledge.parse_file(md, errors)
    assert [e.cause for e in entries] == ["peer_died_first"]
    assert len(errors) == 1 and str(errors[0]).startswith(f"{md}:2: YAML of entry 'port_in_use'")
    assert entries[0].quotes[0].source == "produced here: test, torch 2.13.0+cpu"
    with pytest.raises(knowledge.KnowledgeError, match=r"x\.md:2: YAML of entry 'port_in_use'"):
        knowledge.parse_file(md)


def test_entries_recognise_their_own_quotes():
    """Over an entry's own quoted text, the root signatures point at that entry (or one it declares related)."""
    for e in knowledge.load_entries():
        lines = [ln for q in e.quotes for ln in q.text.splitlines()]
        roots = _matching(lines, ("root",))
        if not any(s.kind == "root" for s in e.signatures):
            assert e.cause == "peer_died_first", f"{e.cause} has no root signature"  # by design: only echoes
            continue
        top = max(roots, key=roots.get)
        assert top == e.cause or top in e.related, (e.cause, roots)


def _matching(lines: list[str], kinds: tuple[str, ...]) -> dict[str, float]:
    """cause -> summed weight of its signatures of the given kinds that match some line, where their
    conditions (`when`, `unless`, `when_ranks_differ`, ...) hold over the same lines."""
    matcher = matcher_for()
    seen = matcher.conditions_in(lines)
    out: dict[str, float] = {}
    for s in matcher.signatures:
        if s.kind in kinds and s.active(seen) and any(s.regex.search(ln) for ln in lines):
            out[s.cause] = out.get(s.cause, 0.0) + s.weight
    return out


PROGRAM = '''
import datetime, sys, torch, torch.distributed as dist
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=10))
rank = dist.get_rank()
out = torch.zeros(2)
try:  # what a ZeRO-style optimizer does on NCCL
    dist.reduce_scatter_tensor(out, torch.ones(4), async_op=True).get_future()
except RuntimeError as exc:
    print(f"[rank{rank}]: RuntimeError: {exc}", flush=True)
dist.barrier()
if rank == 0:  # a metric synced on rank 0 only, before the step's all-reduce
    dist.all_reduce(torch.ones(1))
dist.all_reduce(torch.ones(16))
'''


@pytest.mark.torchrun
def test_signatures_recognise_real_torch_output(tmp_path: Path):
    """Real 2-rank gloo run on torch 2.13: the texts the entries quote are still what torch prints."""
    script = tmp_path / "kb_probe.py"
    script.write_text(PROGRAM, encoding="utf-8")
    res = run_torchrun(script, nproc=2, timeout=60)
    assert not res.timed_out and res.returncode != 0, res.output[-2000:]
    lines = res.output.splitlines()
    roots = _matching(lines, ("root",))
    echoes = _matching(lines, ("echo",))
    assert "gloo_missing_feature" in roots, res.output[-2000:]
    assert "rank_conditional_collective" in roots, res.output[-2000:]
    assert roots["rank_conditional_collective"] >= 4  # 'Received data size doesn't match expected size'
    assert "peer_died_first" in echoes  # the other rank's 'Connection reset by peer' is an echo
    assert not {c for c in roots} - {"gloo_missing_feature", "rank_conditional_collective", "collective_timeout"}, roots


def test_a_file_checked_once_is_not_schema_checked_again_but_an_edit_is(tmp_path, monkeypatch):
    """parse_file keeps a stamp of a file's bytes that passed the schema; an edited file is checked again."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    md = tmp_path / "x.md"
    good = textwrap.dedent("""\
        ### port_in_use — a port is taken

        ```yaml
        cause: port_in_use
        patch: null
        related: []
        verify: "rerun"
        signatures:
          - {regex: "Address already in use", proves: "taken", kind: root}
        ```
        """)
    md.write_text(good, encoding="utf-8")
    assert [e.cause for e in knowledge.parse_file(md)] == ["port_in_use"]
    stamps = list((tmp_path / "cache" / "distdoctor" / "kb-checked").iterdir())
    assert len(stamps) == 1
    md.write_text(good.replace("kind: root", "kind: nonsense"), encoding="utf-8")
    with pytest.raises(knowledge.KnowledgeError, match=r"x\.md:3: entry 'port_in_use' field signatures/0/kind"):
        knowledge.parse_file(md)
    assert len(list(stamps[0].parent.iterdir())) == 1  # a file that failed leaves no stamp
