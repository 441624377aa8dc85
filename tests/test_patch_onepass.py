"""One metadata resolution per file: every patch analyses one tree and rewrites in one shared traversal;
the cheap position/parent/qualified-name tables equal libcst's; a file where two patches' rewrites nest
(and neither declares it composes with the other) is patched one patch at a time, as before."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
import torch
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider, QualifiedNameProvider

from distdoctor.paths import patch_registry
from distdoctor.patching import engine, fastmeta

ALL = patch_registry().all_patches()
FIXTURES = sorted((Path(__file__).parent / "fixtures" / "patches").glob("*/*.in.py"))

# rewritten by five patches, two of them (int_device, local_rank_device; ddp_cpu_args, local_rank_device)
# on the same calls
SEVERAL = '''import os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

assert torch.cuda.is_available()
rank = int(os.environ["RANK"])
dist.init_process_group("nccl")
model = torch.nn.Linear(2, 2).cuda(rank)
model = DDP(model, device_ids=[rank])
x = torch.randn(4, 2).to(rank)
'''


def _sequential(source: str):
    text, changes = engine._sequential(ALL, engine._wrap(cst.parse_module(source)), None, "<t>")
    return text, changes


def test_several_patches_one_resolution():
    before, fallbacks = engine.RESOLUTIONS[0], engine.FALLBACKS[0]
    result = engine.patch_source(SEVERAL)
    assert engine.RESOLUTIONS[0] - before == 1 and engine.FALLBACKS[0] == fallbacks
    assert {c.patch for c in result.changes} == {"cuda_requirements", "gloo_backend", "int_device",
                                                  "local_rank_device", "ddp_cpu_args"}
    assert result.new_source == _sequential(SEVERAL)[0]  # what running them one after the other gives
    assert ('model = torch.nn.Linear(2, 2).to(int(os.environ["LOCAL_RANK"]) if torch.cuda.is_available() '
            'else "cpu")') in result.new_source
    lines = SEVERAL.splitlines()
    for change in result.changes:  # lines of the original file, whichever patch recorded them
        assert change.line and lines[change.line - 1].strip(), change
    assert ("int_device", 9) in {(c.patch, c.line) for c in result.changes}
    assert engine.patch_source(result.new_source).changes == []
    compile(result.new_source, "<t>", "exec")


def test_nested_rewrites_of_unrelated_patches_fall_back_to_one_at_a_time():
    # gloo_backend moves the device line into a CUDA branch; torch_device_cpu rewrote that line in the same
    # pass: run one after the other, torch_device_cpu sees the branch and leaves it alone
    source = SEVERAL + 'device = torch.device("cuda")\n'
    fallbacks = engine.FALLBACKS[0]
    result = engine.patch_source(source)
    assert engine.FALLBACKS[0] == fallbacks + 1
    assert result.new_source == _sequential(source)[0]
    assert 'torch.device("cuda") if' not in result.new_source


def test_valid_sources_cost_at_most_one_resolution():
    for module in ALL:
        for source in module.VALID:
            before = engine.RESOLUTIONS[0]
            engine.patch_source(source, ALL)  # (another patch may rewrite it)
            assert engine.RESOLUTIONS[0] - before <= 1, (module.PATCH.id, source)


@pytest.mark.parametrize("case", FIXTURES, ids=[f"{c.parent.name}/{c.name[:-6]}" for c in FIXTURES])
def test_shared_pass_equals_one_at_a_time_on_fixtures(case: Path):
    source = case.read_bytes().decode("utf-8").lstrip("\ufeff")
    result = engine.patch_source(source, ALL)
    expected, changes = _sequential(source)
    assert result.new_source == (expected if changes and expected != source else source)


def _files() -> list[Path]:
    base = Path(torch.__file__).resolve().parent
    names = ["distributed/launch.py", "distributed/run.py", "distributed/elastic/rendezvous/api.py",
             "nn/parallel/distributed.py"]
    return [base / n for n in names if (base / n).is_file()] + FIXTURES[:20]


@pytest.mark.parametrize("path", _files(), ids=lambda p: "/".join(p.parts[-2:]))
def test_fast_tables_equal_libcst(path: Path):
    module = cst.parse_module(path.read_bytes().decode("utf-8").lstrip("\ufeff"))
    ref = MetadataWrapper(module, unsafe_skip_copy=True).resolve_many(
        [PositionProvider, ParentNodeProvider, QualifiedNameProvider])
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    fastmeta.seed(wrapper)
    positions = wrapper.resolve(PositionProvider)
    assert list(positions) == list(ref[PositionProvider])  # same nodes, same order (nodes_of relies on it)
    assert all(positions[n] == ref[PositionProvider][n] for n in positions)
    parents = wrapper.resolve(ParentNodeProvider)
    assert len(parents) == len(ref[ParentNodeProvider])
    assert all(parents[n] is p for n, p in ref[ParentNodeProvider].items())
    named = (cst.Name, cst.Attribute, cst.Call)  # cstutil.named_nodes walks the parent table in this order
    assert [n for n in parents if isinstance(n, named)] == [n for n in ref[ParentNodeProvider] if isinstance(n, named)]
    names = wrapper.resolve(QualifiedNameProvider)
    for node, value in ref[QualifiedNameProvider].items():
        assert names[node] == (value() if callable(value) else value)


@pytest.mark.parametrize("path", _files(), ids=lambda p: "/".join(p.parts[-2:]))
def test_partial_tables_agree_with_complete(path: Path):
    """The first tracking pass leaves whitespace and punctuation out; the nodes it keeps have the complete
    tables' values, in the complete tables' order, and a question about a left-out node completes them."""
    module = cst.parse_module(path.read_bytes().decode("utf-8").lstrip("\ufeff"))
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    fastmeta.seed(wrapper)
    positions, parents = wrapper.resolve(PositionProvider), wrapper.resolve(ParentNodeProvider)
    kept_ranges, kept_parents = dict(fastmeta.indexed(positions)), dict(fastmeta.indexed(parents))
    assert not any(type(n) in fastmeta._UNTRACKED for n in kept_parents)
    assert all(positions[n] for n in kept_ranges) and all(parents[n] is p for n, p in kept_parents.items())
    assert not positions._tables.complete  # questions about kept nodes complete nothing
    ref = MetadataWrapper(module, unsafe_skip_copy=True).resolve_many([PositionProvider, ParentNodeProvider])
    full_ranges = [n for n in ref[PositionProvider] if n in kept_ranges]
    assert full_ranges == list(kept_ranges)  # same order: nodes_of and named_nodes rely on it
    assert [n for n in ref[ParentNodeProvider] if n in kept_parents] == list(kept_parents)
    assert all(positions[n] == ref[PositionProvider][n] for n in kept_ranges)
    assert all(parents[n] is p for n, p in ref[ParentNodeProvider].items() if n in kept_parents)
    whitespace = next(n for n in ref[ParentNodeProvider] if type(n) is cst.SimpleWhitespace)
    assert parents[whitespace] is ref[ParentNodeProvider][whitespace] and positions._tables.complete
    assert len(kept_parents) < len(parents) == len(ref[ParentNodeProvider])


@pytest.mark.parametrize("path", _files()[:8], ids=lambda p: "/".join(p.parts[-2:]))
def test_import_names_memo_answers_as_libcst(path: Path):
    """Qualified names looked up under import_names_memo equal libcst's own, each a set of its own, and the
    memo leaves ImportAssignment as it was."""
    from libcst.metadata import ImportAssignment

    original = ImportAssignment.get_qualified_names_for
    module = cst.parse_module(path.read_bytes().decode("utf-8").lstrip("\ufeff"))
    ref = MetadataWrapper(module, unsafe_skip_copy=True).resolve(QualifiedNameProvider)
    wrapper = fastmeta.Wrapper(module, unsafe_skip_copy=True)
    fastmeta.seed(wrapper)
    with fastmeta.import_names_memo():
        names = wrapper.resolve(QualifiedNameProvider)
        got = {node: names[node] for node in ref}
    assert ImportAssignment.get_qualified_names_for is original
    for node, value in ref.items():
        assert got[node] == (value() if callable(value) else value)
    answers = [v for v in got.values() if v]
    assert len({id(v) for v in answers}) == len(answers)  # no two nodes share one set
