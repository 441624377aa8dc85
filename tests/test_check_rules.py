"""Every checker rule's inline VALID / INVALID examples: valid code is not reported, invalid code is reported
at exactly the given line, with the rule's code and cause."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from distdoctor.check import rules
from distdoctor.check.engine import check_source, finish

MODULES = rules.all_rules()
VALID = [pytest.param(m, src, id=f"{m.RULE.code}-valid{i}") for m in MODULES for i, src in enumerate(m.VALID)]
INVALID = [pytest.param(m, src, line, id=f"{m.RULE.code}-invalid{i}")
           for m in MODULES for i, (src, line) in enumerate(m.INVALID)]
ROOT = Path(__file__).resolve().parent.parent


def _run(module, source: str):
    return finish([check_source(source, "example.py", [module])], [module])


def test_every_rule_has_examples_and_a_known_cause():
    seed = set(yaml.safe_load((ROOT / "references" / "taxonomy.yaml").read_text())["causes"])
    corpus_readme = (ROOT / "evals" / "corpus" / "README.md").read_text()
    long_tail = set(re.findall(r"^\| ([a-z0-9_]+) \|", corpus_readme, re.M))
    codes = [m.RULE.code for m in MODULES]
    assert len(codes) == len(set(codes)) and len(codes) >= 15
    for module in MODULES:
        assert module.VALID and module.INVALID, f"{module.RULE.code} needs VALID and INVALID examples"
        assert module.RULE.cause in seed | long_tail, f"{module.RULE.code}: unknown cause {module.RULE.cause}"
        assert re.fullmatch(r"DD\d{3}", module.RULE.code) and module.__doc__


@pytest.mark.parametrize("module,source", VALID)
def test_valid_is_not_reported(module, source):
    assert _run(module, source) == []


@pytest.mark.parametrize("module,source,line", INVALID)
def test_invalid_is_reported_on_its_line(module, source, line):
    found = _run(module, source)
    assert [f.line for f in found] == [line]
    assert all(f.code == module.RULE.code and f.cause == module.RULE.cause and f.col >= 1 for f in found)


def test_call_graph_crosses_files():
    a = "import torch.distributed as dist\n\ndef evaluate(m):\n    dist.all_reduce(m)\n"
    b = "from evalutil import evaluate\nimport torch.distributed as dist\nif dist.get_rank() == 0:\n    evaluate(x)\n"
    mod = rules.get("DD101")
    found = finish([check_source(a, "evalutil.py", [mod]), check_source(b, "train.py", [mod])], [mod])
    assert [(f.path, f.line) for f in found] == [("train.py", 4)]
    assert "evaluate() reaches dist.all_reduce" in found[0].message


def test_findings_at_names_the_line(tmp_path):
    from distdoctor.check import findings_at

    (tmp_path / "train.py").write_text("import torch.distributed as dist\nif dist.get_rank() == 0:\n"
                                       "    dist.barrier()\n")
    assert [f.code for f in findings_at(str(tmp_path / "train.py"), 3)] == ["DD101"]
    assert findings_at(str(tmp_path / "train.py"), 2) == []


def test_call_graph_follows_files_the_screen_left_out(tmp_path):
    from distdoctor.check.engine import check_paths

    (tmp_path / "train.py").write_text("import torch.distributed as dist\nfrom evalmod import evaluate\n"
                                       "if dist.get_rank() == 0:\n    evaluate()\n")
    (tmp_path / "evalmod.py").write_text("from util import helper\n\ndef evaluate():\n    return helper()\n")
    (tmp_path / "util.py").write_text("import torch.distributed as dist\n\ndef helper():\n"
                                      "    dist.all_reduce(t)\n")
    found = check_paths([str(tmp_path)], select=["DD101"]).findings
    assert [(f.path.rsplit("/", 1)[-1], f.line) for f in found] == [("train.py", 4)]
    assert "evaluate() reaches helper() -> dist.all_reduce" in found[0].message


def test_guard_is_transitive_across_files():
    """A save two calls below a main-process-first block in another file is guarded (yolov7's dataset cache);
    the same chain reached by one unguarded module-level call is reported."""
    mod = rules.get("DD301")
    data = ("import torch\nimport torch.distributed as dist\n\nclass Data:\n    def __init__(self, p):\n"
            "        self.labels = self.cache_labels(p)\n\n    def cache_labels(self, p):\n"
            "        torch.save(x, p)\n        return x\n")
    train = ("import torch.distributed as dist\nfrom data import Data\n\ndef loader(rank, p):\n"
             "    with torch_distributed_zero_first(rank):\n        return Data(p)\n")
    parts = [check_source(data, "data.py", [mod]), check_source(train, "train.py", [mod])]
    assert finish(parts, [mod]) == []
    opened = check_source(train + "Data('x')\n", "train.py", [mod])
    found = finish([parts[0], opened], [mod])
    assert [(f.path, f.line, f.code) for f in found] == [("data.py", 9, "DD301")]
