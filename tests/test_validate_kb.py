"""The knowledge-base validator passes on the real tree and fails precisely on broken copies."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from distdoctor import paths
from distdoctor.validate import validate

TAXONOMY = paths.taxonomy_path()
FIELD_REPORTS = paths.field_reports_dir()
SCRIPT = paths.ROOT / "scripts" / "validate_kb.py"

pytestmark = pytest.mark.skipif(TAXONOMY is None, reason="references/taxonomy.yaml not found")


def _copy_tree(dst: Path) -> Path:
    """A minimal checkout: references, SKILL.md, README.md, schemas, and patches/ (module names only)."""
    root = dst / "repo"
    root.mkdir()
    shutil.copytree(paths.REFERENCES, root / "references")
    shutil.copytree(paths.SCHEMAS, root / "schemas")
    shutil.copy(paths.SKILL, root / "SKILL.md")
    (root / "patches").mkdir()
    for p in paths.PATCHES.glob("*.py"):
        (root / "patches" / p.name).write_text("# placeholder for the validator: only the module name matters\n")
    return root


def _run(root: Path) -> list[str]:
    problems, _ = validate(root, TAXONOMY, FIELD_REPORTS)
    return [str(p) for p in problems]


def _line_of(path: Path, needle: str, start: int = 0) -> int:
    lines = path.read_text(encoding="utf-8").splitlines()
    for i in range(start, len(lines)):
        if needle in lines[i]:
            return i + 1
    raise AssertionError(f"{needle!r} not in {path}")


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) >= 1, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    return _copy_tree(tmp_path)


def test_real_tree_is_valid():
    problems, _ = validate(paths.ROOT, TAXONOMY, FIELD_REPORTS)
    assert [str(p) for p in problems] == []


@pytest.mark.skipif(paths.seed_taxonomy_path() is None, reason="shared/taxonomy.yaml not beside this checkout")
def test_project_taxonomy_keeps_every_seed_id_and_its_patch():
    """The project's vocabulary is a superset of the seed: no id renamed or dropped, no patch changed."""
    import yaml
    seed = yaml.safe_load(paths.seed_taxonomy_path().read_text(encoding="utf-8"))["causes"]
    ours = yaml.safe_load(paths.TAXONOMY.read_text(encoding="utf-8"))["causes"]
    assert sorted(set(seed) - set(ours)) == []
    assert {k: v.get("patch") for k, v in seed.items()} == {k: ours[k].get("patch") for k in seed}


def test_copy_is_valid_before_breaking_it(tree: Path):
    assert _run(tree) == []


def test_missing_cause(tree: Path):
    md = tree / "references" / "multi-node-networking.md"
    text = md.read_text(encoding="utf-8")
    start = text.index('<a id="fabric_fault"></a>')
    md.write_text(text[:start], encoding="utf-8")
    out = _run(tree)
    assert "references:1: cause 'fabric_fault' has no entry in references/*.md" in out
    # other entries point at fabric_fault by link: the now dangling links are reported too
    assert any("no heading or anchor 'fabric_fault'" in p for p in out)


def test_bad_regex(tree: Path):
    md = tree / "references" / "backends.md"
    _replace(md, 'regex: "Work::getFuture not implemented"', 'regex: "Work::getFuture (not implemented"')
    block = _line_of(md, "```yaml", _line_of(md, "### gloo_missing_feature") - 1)
    out = _run(tree)
    assert any(p.startswith(f"references/backends.md:{block}: entry 'gloo_missing_feature' signature 0")
               and "regex does not compile" in p for p in out), out


def test_regex_not_matching_its_own_quote(tree: Path):
    md = tree / "references" / "launch-and-devices.md"
    _replace(md, 'regex: "invalid device ordinal"', 'regex: "invalid device ordnial"')
    block = _line_of(md, "```yaml", _line_of(md, "### local_rank_device") - 1)
    out = _run(tree)
    assert (f"references/launch-and-devices.md:{block}: entry 'local_rank_device' signature 0 "
            "('invalid device ordnial'): matches no line of the entry's own quoted text") in out


def test_unknown_patch_id(tree: Path):
    md = tree / "references" / "backends.md"
    _replace(md, "patch: sdpa_force", "patch: sdpa_forced")
    block = _line_of(md, "```yaml", _line_of(md, "### flash_attn_on_cpu") - 1)
    out = _run(tree)
    assert (f"references/backends.md:{block}: entry 'flash_attn_on_cpu': patch 'sdpa_forced' not found "
            "(expected patches/sdpa_forced.py)") in out
    assert any("differs from the taxonomy's 'sdpa_force'" in p for p in out)


def test_missing_patch_module(tree: Path):
    (tree / "patches" / "gloo_future_shim.py").unlink()
    out = _run(tree)
    assert any("entry 'gloo_missing_feature': patch 'gloo_future_shim' not found" in p for p in out)


def test_dangling_links(tree: Path):
    skill = tree / "SKILL.md"
    with skill.open("a", encoding="utf-8") as fh:
        fh.write("\nSee [gone](references/nowhere.md#x) and [bad anchor](references/backends.md#no_such_cause).\n")
    n = len(skill.read_text(encoding="utf-8").splitlines())
    out = _run(tree)
    assert f"SKILL.md:{n}: link target 'references/nowhere.md#x' does not exist" in out
    assert f"SKILL.md:{n}: link 'references/backends.md#no_such_cause': no heading or anchor 'no_such_cause' in references/backends.md" in out


def test_skill_must_route_to_every_entry(tree: Path):
    skill = tree / "SKILL.md"
    text = skill.read_text(encoding="utf-8")
    row = next(ln for ln in text.splitlines() if "#fabric_fault)" in ln)
    skill.write_text(text.replace(row + "\n", ""), encoding="utf-8")
    assert _run(tree) == ["SKILL.md:1: SKILL.md does not route to entry 'fabric_fault' "
                          "(no link to references/multi-node-networking.md#fabric_fault)"]


def test_links_in_code_are_not_links(tree: Path):
    skill = tree / "SKILL.md"
    with skill.open("a", encoding="utf-8") as fh:
        fh.write("\n`[not a link](nowhere.md)`\n\n```text\n[also not](nowhere.md)\n```\n")
    assert _run(tree) == []


def test_bad_skill_front_matter(tree: Path):
    skill = tree / "SKILL.md"
    _replace(skill, "name: distdoctor", "name: Dist_Doctor\nversion: 1")
    _replace(skill, "description: Diagnose", "description: <b>Diagnose</b>")
    out = _run(tree)
    assert "SKILL.md:2: front matter 'name' 'Dist_Doctor' must be lowercase letters, digits and single hyphens" in out
    assert any(p.startswith("SKILL.md:3: front matter key 'version' is not in the Agent Skills spec") for p in out)
    assert "SKILL.md:4: front matter 'description' must not contain '<' or '>'" in out


def test_skill_description_too_long_and_missing_front_matter(tree: Path):
    skill = tree / "SKILL.md"
    text = skill.read_text(encoding="utf-8")
    skill.write_text(text.replace("description: Diagnose", "description: " + "x" * 1100 + " Diagnose", 1), encoding="utf-8")
    assert any("front matter 'description' is" in p and "at most 1024" in p for p in _run(tree))
    skill.write_text("# no front matter\n", encoding="utf-8")
    assert "SKILL.md:1: missing YAML front matter (the file must start with '---')" in _run(tree)


def test_cross_match_needs_related(tree: Path):
    md = tree / "references" / "multi-node-networking.md"
    # port_in_use gains a signature that matches text quoted in unused_parameters (not related)
    _replace(md, '''  - regex: "EADDRINUSE"''', '''  - regex: "EADDRINUSE|did not receive grad"''')
    out = _run(tree)
    assert any("entry 'port_in_use' signature 'EADDRINUSE|did not receive grad' matches text quoted in entry "
               "'unused_parameters'" in p for p in out), out


@pytest.mark.skipif(FIELD_REPORTS is None, reason="shared/field-reports not beside this checkout")
def test_field_report_quote_must_be_verbatim(tree: Path):
    md = tree / "references" / "launch-and-devices.md"
    _replace(md, "[rank4]: RuntimeError: CUDA error: invalid device ordinal",
             "[rank4]: RuntimeError: CUDA error: invalid device ordinal (paraphrased)")
    line = _line_of(md, "invalid device ordinal (paraphrased)")
    out = _run(tree)
    assert any(p.startswith(f"references/launch-and-devices.md:{line}: entry 'local_rank_device': line not found "
                            "verbatim in field report nanogpt-ddp-training-log.md") for p in out), out


def test_quote_without_source_and_bad_source(tree: Path):
    md = tree / "references" / "backends.md"
    _replace(md, "Source: https://github.com/deepinsight/insightface/issues/1813", "Source: a forum somewhere")
    out = _run(tree)
    assert any("source 'a forum somewhere' is neither" in p for p in out)


def test_anchored_and_overbroad_regexes(tree: Path):
    md = tree / "references" / "hangs-and-collectives.md"
    _replace(md, 'regex: "Parameter(?:s| indices) which did not receive grad for rank \\\\d+"',
             'regex: "^Parameter(?:s| indices) which did not receive grad for rank \\\\d+"')
    _replace(md, 'regex: "find_unused_parameters=True"', 'regex: "(find_unused_parameters=True)?"')
    out = _run(tree)
    assert any("anchored with '^'" in p and "unused_parameters" in p for p in out)
    assert any("(find_unused_parameters=True)?" in p and "matches an empty line" in p for p in out)


def test_malformed_entries_are_reported_and_others_still_checked(tree: Path):
    md = tree / "references" / "backends.md"
    _replace(md, "cause: gloo_missing_feature\npatch: gloo_future_shim", "cause: gloo_missing_feature\npatch: [unclosed")
    block = _line_of(md, "```yaml", _line_of(md, "### gloo_missing_feature") - 1)
    out = _run(tree)
    assert any(p.startswith(f"references/backends.md:{block}: YAML of entry 'gloo_missing_feature'") for p in out), out
    assert "references:1: cause 'gloo_missing_feature' has no entry in references/*.md" in out
    assert not any("'flash_attn_on_cpu' has no entry" in p for p in out)  # the entry after it still parsed


def test_schema_violation_and_duplicate(tree: Path):
    md = tree / "references" / "backends.md"
    _replace(md, "    kind: root\n    weight: 5\n", "    kind: cause\n    weight: 5\n")
    dup = tree / "references" / "zz-dup.md"
    text = (tree / "references" / "hangs-and-collectives.md").read_text(encoding="utf-8")
    start = text.index("### unused_parameters")
    dup.write_text(text[start:text.index('<a id="dataloader_uneven">')], encoding="utf-8")
    out = _run(tree)
    assert any("field signatures/0/kind: 'cause' is not one of ['root', 'echo', 'hint']" in p for p in out), out
    assert any(p.startswith("references/zz-dup.md:1: duplicate entry for cause 'unused_parameters'") for p in out)


def test_bad_bytes(tree: Path):
    (tree / "references" / "broken.md").write_bytes(b"# title\n\xff\xfe not utf-8\n")
    (tree / "references" / "binary.md").write_bytes(b"\x00\x01\x02")
    (tree / "references" / "linked.md").symlink_to(tree / "references" / "backends.md")
    out = _run(tree)
    assert "references/linked.md:1: is a symlink; knowledge files must be regular files in the repository" in out
    assert not any("duplicate entry" in p for p in out)  # the symlink is not parsed a second time
    assert "references/broken.md:2: not valid UTF-8 (byte 8)" in out
    assert "references/binary.md:1: binary file (contains NUL bytes), expected UTF-8 Markdown" in out


def test_profiles_order_and_schema(tree: Path):
    prof = tree / "profiles"
    prof.mkdir()
    (prof / "local.md").write_text(
        "---\nlauncher: torchrun\n---\n# Local\n\n## Launch\n\n## Debugging a hang\n\n## Per-rank logs\n\n"
        "## Cleaning up\n\n## Gotchas\n\n- [peer](../references/hangs-and-collectives.md#peer_died_first)\n"
        "- [bad](../references/hangs-and-collectives.md#no_such)\n", encoding="utf-8")
    (prof / "nofront.md").write_text("# x\n\n## Launch\n", encoding="utf-8")
    problems, notices = validate(tree, TAXONOMY, FIELD_REPORTS)
    out = [str(p) for p in problems]
    if not (tree / "schemas" / "profile.schema.json").exists():
        assert any("profile.schema.json absent" in n for n in notices)
    assert ("profiles/local.md:8: profile section '## Debugging a hang' out of order; expected "
            "## Launch → ## Per-rank logs → ## Debugging a hang → ## Cleaning up → ## Gotchas") in out, out
    assert any(p.startswith("profiles/local.md:17: link '../references/hangs-and-collectives.md#no_such'") for p in out)
    assert "profiles/nofront.md:1: missing YAML front matter (the file must start with '---')" in out
    assert "profiles/nofront.md:1: profile lacks section '## Gotchas'" in out
    assert not any("links no entry" in p and "local.md" in p for p in out)
    (prof / "nolinks.md").write_text("---\nlauncher: srun\n---\n## Launch\n## Per-rank logs\n## Debugging a hang\n"
                                     "## Cleaning up\n## Gotchas\n- srun needs --kill-on-bad-exit\n", encoding="utf-8")
    out = [str(p) for p in validate(tree, TAXONOMY, FIELD_REPORTS)[0]]
    assert any(p.startswith("profiles/nolinks.md:8: profile '## Gotchas' links no entry") for p in out), out
    # with a schema, front matter fields are checked and named
    (tree / "schemas" / "profile.schema.json").write_text(
        '{"type": "object", "required": ["launcher", "kill_on_failure"], '
        '"properties": {"launcher": {"enum": ["srun", "torchrun"]}}}', encoding="utf-8")
    (prof / "local.md").write_text((prof / "local.md").read_text().replace("launcher: torchrun", "launcher: mpirun"))
    out = [str(p) for p in validate(tree, TAXONOMY, FIELD_REPORTS)[0]]
    assert any(p.startswith("profiles/local.md:2: front matter field launcher: 'mpirun' is not one of") for p in out), out
    assert any(p.startswith("profiles/local.md:1: front matter field (front matter): 'kill_on_failure' is a required property")
               for p in out), out


def test_cli_exit_codes_and_format(tree: Path):
    ok = subprocess.run([sys.executable, str(SCRIPT), "--root", str(tree), "--taxonomy", str(TAXONOMY)],
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout == "" and "validate_kb: ok" in ok.stderr
    _replace(tree / "references" / "backends.md", 'regex: "ProcessGroupGloo does not support \\\\w+"',
             'regex: "ProcessGroupGloo does not support ("')
    bad = subprocess.run([sys.executable, str(SCRIPT), "--root", str(tree), "--taxonomy", str(TAXONOMY)],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1
    lines = bad.stdout.splitlines()
    assert lines and all(re.match(r"^[^:\s]+:\d+: \S", ln) for ln in lines), lines
    assert "1 problem(s)" in bad.stderr
    usage = subprocess.run([sys.executable, str(SCRIPT), "--root", str(tree / "nope")], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2 and "not a directory" in usage.stderr
    helped = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "--root" in helped.stdout


def test_ranks_differ_condition_is_checked(tree: Path):
    md = tree / "references" / "hangs-and-collectives.md"
    good = 'when_ranks_differ: "(?:rank (?P<rank>\\\\d+)\\\\D{0,20}?)?\\\\b(?P<value>\\\\d+) batches"'
    _replace(md, good, 'when_ranks_differ: "(?P<count>\\\\d+) batches"')
    out = _run(tree)
    assert any("entry 'dataloader_uneven' field signatures/2/when_ranks_differ" in p for p in out), out  # the schema
    _replace(md, 'when_ranks_differ: "(?P<count>\\\\d+) batches"', 'when_ranks_differ: "(?P<value>\\\\d+) epochs"')
    out = _run(tree)
    assert any("when_ranks_differ regex matches no line of the entry's own quoted text" in p for p in out), out


def test_ranks_differ_signature_cross_matches_only_where_its_condition_holds(tree: Path):
    # dataloader_uneven's "Timed out waiting ..." signature is not related to checkpoint_all_ranks, whose quote
    # holds that line too; no rank counts batches there, so the signature could never count on that text
    assert _run(tree) == []
    md = tree / "references" / "hangs-and-collectives.md"
    _replace(md, '''  - regex: "Timed out waiting \\\\d+ms for (recv|send) operation to complete"
    when_ranks_differ:''', '''  - regex: "Timed out waiting \\\\d+ms for (recv|send) operation to complete"
    unless_ranks_differ:''')
    out = _run(tree)
    assert any("entry 'dataloader_uneven'" in p and "'checkpoint_all_ranks'" in p for p in out), out


def test_often_behind_lists_only_related_taxonomy_ids(tree: Path):
    tax = tree / "references" / "taxonomy.yaml"
    assert validate(tree, tax, FIELD_REPORTS)[0] == []
    text = tax.read_text(encoding="utf-8")
    old = next(ln for ln in text.splitlines() if ln.strip().startswith("often_behind: [rank_start_skew"))
    # itself, an unknown id, one no entry relates to collective_timeout, and a duplicate
    tax.write_text(text.replace(old, "    often_behind: [collective_timeout, no_such_cause, tcpstore_libuv_windows, "
                                     "rank_start_skew, rank_start_skew]"), encoding="utf-8")
    line = _line_of(tax, "  collective_timeout:")
    out = [str(p) for p in validate(tree, tax, FIELD_REPORTS)[0]]
    where = f"references/taxonomy.yaml:{line}: cause 'collective_timeout': often_behind"
    assert f"{where} id 'collective_timeout' is the cause itself" in out
    assert f"{where} id 'no_such_cause' is not in the taxonomy" in out
    assert f"{where} lists an id twice" in out
    assert any(p.startswith(f"{where} id 'tcpstore_libuv_windows' is related to it by no entry") for p in out), out
    tax.write_text(text.replace(old, "    often_behind: rank_start_skew"), encoding="utf-8")
    assert f"{where} must be a list of cause ids" in [str(p) for p in validate(tree, tax, FIELD_REPORTS)[0]]
