"""Plugin discovery shared by patches/ and the checker's rules: what counts, the order, a broken module named."""

from __future__ import annotations

import sys

import pytest

from distdoctor.plugins import discover


@pytest.fixture
def package(tmp_path, monkeypatch):
    """make(modules) -> path of a fresh importable package `plugpkg` holding those modules."""
    def make(modules: dict[str, str]) -> str:
        root = tmp_path / "plugpkg"
        root.mkdir()
        (root / "__init__.py").write_text("")
        for name, text in modules.items():
            (root / f"{name}.py").write_text(text)
        return str(root)

    monkeypatch.syspath_prepend(str(tmp_path))
    yield make
    for name in [n for n in sys.modules if n == "plugpkg" or n.startswith("plugpkg.")]:
        del sys.modules[name]


def test_modules_with_every_needed_name_sorted_by_key(package):
    path = package({"b": "ID = 1\nrun = 0\n", "a": "ID = 2\nrun = 0\n", "c": "ID = 0\n", "_private": "ID = -1\nrun = 0\n"})
    found = discover("plugpkg", [path], ("ID", "run"), key=lambda m: m.ID)
    assert [m.__name__ for m in found] == ["plugpkg.b", "plugpkg.a"]


def test_a_module_that_cannot_be_imported_is_named(package):
    path = package({"broken": "import no_such_module_here\n"})
    with pytest.raises(ImportError, match=r"plugpkg/broken\.py cannot be imported: ModuleNotFoundError"):
        discover("plugpkg", [path], ("ID",), key=lambda m: m.ID)
