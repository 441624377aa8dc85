"""fastimports: AddImportsVisitor run on the module's head gives the code libcst's own transform gives."""

from __future__ import annotations

import inspect
from pathlib import Path

import libcst as cst
import pytest
import torch
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor
from libcst.codemod.visitors._add_imports import _GatherTopImportsBeforeStatements

from distdoctor.patching import fastimports, fastwalk

TORCH = Path(torch.__file__).parent
SOURCES = [
    "",
    '"""Only a docstring."""\n',
    "import os\n",
    "import os\nimport sys\n",
    '"""Doc."""\nimport os\n\nx = 1\n',
    "__strict__ = True\nimport os\nclass K:\n    def f(self):\n        import json\n        return 1\n",
    "# a comment\nimport os\n# leading comment\ndef f():\n    from torch import nn\n    return nn\n",
    "import os\n\n\nif True:\n    import torch\n",
    "from torch import nn\nfrom os import path as p\n\n\nclass A:\n    pass\n",
    "from __future__ import annotations\nx = 1\nimport torch\n",
    "x = 1\n",
    "from torch import *\ny = 2\n",
]
SOURCES += [p.read_text() for p in (TORCH / "distributed/run.py", TORCH / "distributed/launch.py")
            if p.is_file()]
REQUESTS = [("torch", None, None), ("os", None, None), ("torch", "nn", None), ("os", "path", "p"),
            ("__future__", "annotations", None), ("contextlib", "nullcontext", None)]


def _own_callbacks(cls: type) -> set[str]:
    return {name for klass in cls.__mro__ if klass.__module__.startswith("libcst.codemod")
            for name in vars(klass) if name.startswith(("visit_", "leave_"))}


def test_visitors_act_only_where_fastimports_walks():
    """The assumptions: AddImportsVisitor acts at the module and its imports, the gatherer at the module."""
    assert _own_callbacks(AddImportsVisitor) == {"visit_Module", "leave_ImportFrom", "leave_Module"}
    assert _own_callbacks(_GatherTopImportsBeforeStatements) == {"leave_Module"}
    assert "leave_Module" in inspect.getsource(_GatherTopImportsBeforeStatements)


@pytest.mark.parametrize("source", SOURCES, ids=range(len(SOURCES)))
@pytest.mark.parametrize("request_", REQUESTS, ids=lambda r: ".".join(filter(None, r)))
def test_head_only_transform_matches_libcst(source, request_):
    module = cst.parse_module(source)
    expected_ctx, fast_ctx = CodemodContext(), CodemodContext()
    for ctx in (expected_ctx, fast_ctx):
        AddImportsVisitor.add_needed_import(ctx, request_[0], request_[1], request_[2])
    expected = AddImportsVisitor(expected_ctx).transform_module(module).code
    with fastwalk.visitors(), fastimports.matcher_scans():
        got = fastimports.add_imports(AddImportsVisitor(fast_ctx), module).code
    assert got == expected


def test_matcher_scans_restored_and_remembered():
    import libcst.matchers._visitors as mv

    before = mv._gather_matchers
    with fastimports.matcher_scans():
        AddImportsVisitor(CodemodContext())
        assert ("_gather_constructed_visit_funcs", AddImportsVisitor) in fastimports._NOTHING_FOUND
    assert mv._gather_matchers is before
