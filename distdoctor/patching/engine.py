"""Apply patch modules to source text, files and repositories: prefilter, rewrite, verify, diff, write.

`patch_source` is the core (one parse, every selected patch in registry order). `process_file` adds
the file-level safety (symlinks, binary, encoding, compile check, atomic write) and `patch_paths`
walks repositories, optionally over a process pool.
"""

from __future__ import annotations

import ast
import difflib
import gc
import os
import re
import stat
import sys
import tempfile
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Callable, Iterable, Iterator, Sequence

import libcst as cst
from libcst.codemod import CodemodContext, SkipFile
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor
from libcst.metadata import MetadataWrapper

from distdoctor import paths
from distdoctor.patching import cstutil, fastcst, fastimports, fastmeta, fastwalk
from distdoctor.patching.base import Change, PatchCommand, PatchOptions

BOM = "\ufeff"
MAX_FILE_BYTES = 8 * 1024 * 1024
SKIP_DIRS = frozenset({".git", ".hg", ".svn", ".venv", "venv", "site-packages", "build", "dist", "node_modules",
                       "__pycache__", ".tox", ".nox", ".eggs", ".mypy_cache", ".pytest_cache", ".ruff_cache"})


class PatchFailure(Exception):
    """A patch raised while rewriting a file (a bug in the patch, reported with its id)."""

    def __init__(self, patch_id: str, exc: BaseException) -> None:
        super().__init__(f"patch {patch_id} failed: {type(exc).__name__}: {exc}")
        self.patch_id = patch_id


@dataclass
class PatchResult:
    new_source: str
    changes: list[Change]

    @property
    def changed(self) -> bool:
        return bool(self.changes)


def _registry() -> list[ModuleType]:
    return paths.patch_registry().all_patches()


def prefilter_strings(patch_modules: Iterable[ModuleType]) -> tuple[str, ...]:
    """Union of the patches' prefilter substrings (empty tuple: some patch wants every file)."""
    out: list[str] = []
    for module in patch_modules:
        if not module.PATCH.prefilter:
            return ()
        out += [s for s in module.PATCH.prefilter if s not in out]
    return tuple(out)


def _wanted(module: ModuleType, source: str) -> bool:
    pre = module.PATCH.prefilter
    return not pre or any(s in source for s in pre)


def _screen(active: list[ModuleType], text: str) -> list[ModuleType]:
    """Drop patches whose optional `screen(ast_tree)` says the file has nothing for them. Python's C
    parser is an order of magnitude faster than libcst plus name resolution; screens only decide
    whether to look, every rewrite still goes through libcst."""
    if not all(hasattr(m, "screen") for m in active):
        keep_always = [m for m in active if not hasattr(m, "screen")]
        screened = [m for m in active if hasattr(m, "screen")]
    else:
        keep_always, screened = [], active
    if not screened:
        return active
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return active  # let libcst parse it and report what is wrong
    passed = {id(m) for m in screened if m.screen(tree)}
    return [m for m in active if m in keep_always or id(m) in passed]


def patch_source(source: str, patches: list[ModuleType] | None = None, options: PatchOptions | None = None,
                 path: str = "<string>") -> PatchResult:
    """Apply the patches' Transformers in registry order to one parse of `source`.

    Every patch analyses the same tree with one metadata resolution, and their visit/leave methods run
    together in one traversal (`_Combined`); a file where two patches rewrite the same node, or where a
    patch rewrites without recording, is patched one patch at a time instead (`_sequential`).
    Returns `source` itself (the same object) and no changes when nothing applied. Raises
    libcst.ParserSyntaxError for unparsable input and PatchFailure when a patch itself breaks.
    """
    selected = _registry() if patches is None else patches
    active = [m for m in selected if _wanted(m, source)]
    if not active:
        return PatchResult(source, [])
    bom = source.startswith(BOM)
    text = source[1:] if bom else source
    active = _screen(active, text)
    if not active:
        return PatchResult(source, [])
    wrapper = _wrap(fastcst.parse_module(text))
    with fastwalk.visitors(), fastmeta.import_names_memo():
        try:
            new_text, changes = _combined(active, wrapper, options, path)
        except _Diverged:
            FALLBACKS[0] += 1
            new_text, changes = _sequential(active, wrapper, options, path)
    if not changes or new_text == text:
        return PatchResult(source, [])
    return PatchResult((BOM if bom else "") + new_text, sorted(changes, key=lambda c: (c.line, c.patch)))


RESOLUTIONS = [0]  # metadata wrappers built by patch_source in this process (tests pin one per file)
FALLBACKS = [0]  # files patched one patch at a time because the shared pass diverged


def _wrap(module: cst.Module) -> MetadataWrapper:
    """One metadata resolution: a wrapper whose position, parent and qualified-name tables come from one
    tracking code generation (distdoctor.patching.fastmeta); scopes are resolved by libcst's providers on
    first use (fastmeta.Wrapper runs them without the batched traversal)."""
    RESOLUTIONS[0] += 1
    wrapper = fastmeta.Wrapper(module, unsafe_skip_copy=True)
    fastmeta.seed(wrapper)
    return wrapper


class _LazyTables(fastmeta.LazyTable):
    """A patch's `metadata`: its declared providers, each resolved on the wrapper when first asked (a patch
    that finds nothing in its visit_Module never pays for scopes)."""

    def __init__(self, wrapper: MetadataWrapper, providers) -> None:
        super().__init__(frozenset(providers))
        self._wrapper = wrapper

    def __getitem__(self, provider):
        if provider not in self._keys:
            raise KeyError(provider)
        return self._wrapper.resolve(provider)


class _Diverged(Exception):
    """The single shared pass cannot stand for running the patches one after the other on this file."""


def _commands(active: list[ModuleType], wrapper: MetadataWrapper, options: PatchOptions | None,
              path: str) -> list[tuple[ModuleType, PatchCommand]]:
    out = []
    for patch in active:
        context = CodemodContext(filename=path, full_module_name=None, scratch={}, wrapper=wrapper)
        command = patch.Transformer(context, options)
        command.metadata = _LazyTables(wrapper, command.get_inherited_dependencies())
        out.append((patch, command))
    return out


def _combined(active: list[ModuleType], wrapper: MetadataWrapper, options: PatchOptions | None,
              path: str) -> tuple[str, list[Change]]:
    commands = _commands(active, wrapper, options, path)
    walker = _Combined(commands)
    tree = walker.run(wrapper.module)
    changes: list[Change] = []
    for i, (patch, command) in enumerate(commands):
        recorded = list(command.context.scratch.get("distdoctor_changes", []))
        if walker.changed[i] and not recorded:
            raise _Diverged(patch.PATCH.id)  # a rewrite it did not record: the sequential path drops it
        if not recorded or not (walker.changed[i] or _wants_imports(command)):
            continue  # recorded, but left the tree as it was
        changes += recorded
        tree = _apply_imports(command, tree)
    return (fastcst.code(tree) if changes else ""), changes


def _sequential(active: list[ModuleType], wrapper: MetadataWrapper, options: PatchOptions | None,
                path: str) -> tuple[str, list[Change]]:
    """The patches one after the other, each on the previous one's output (a new resolution after each
    patch that rewrote): for the rare file where the shared pass cannot stand for that."""
    changes: list[Change] = []
    for patch in active:
        ((_, command),) = _commands([patch], wrapper, options, path)
        try:
            new_module = _transform(command, wrapper)
        except SkipFile:
            continue
        except Exception as exc:
            raise PatchFailure(patch.PATCH.id, exc) from exc
        recorded = list(command.context.scratch.get("distdoctor_changes", []))
        if not recorded or new_module.code == wrapper.module.code:
            continue  # a rewrite counts only when the patch recorded it
        changes += recorded
        wrapper = _wrap(new_module.deep_clone())  # rewritten trees may share nodes
    return wrapper.module.code, changes


def _transform(command: PatchCommand, wrapper: MetadataWrapper) -> cst.Module:
    """Codemod.transform_module, but on an already wrapped module (metadata resolved once, reused)."""
    return _apply_imports(command, wrapper.module.visit(command))


def _wants_imports(command: PatchCommand) -> bool:
    scratch = command.context.scratch
    return AddImportsVisitor.CONTEXT_KEY in scratch or RemoveImportsVisitor.CONTEXT_KEY in scratch


def _apply_imports(command: PatchCommand, tree: cst.Module) -> cst.Module:
    for key, helper in ((AddImportsVisitor.CONTEXT_KEY, AddImportsVisitor),
                        (RemoveImportsVisitor.CONTEXT_KEY, RemoveImportsVisitor)):
        if key in command.context.scratch:
            with fastimports.matcher_scans():
                visitor = helper(command.context)
                tree = (fastimports.add_imports(visitor, tree) if helper is AddImportsVisitor
                        else visitor.transform_module(tree))
    return tree


class _Combined(cst.CSTTransformer):
    """Every patch's visit_/leave_ methods in one traversal of the tree, in registry order at each node.

    A patch whose visit_X returns False does not see X's descendants (its leave_X still runs, as in
    libcst); one whose visit_Module returns False (found nothing) leaves the traversal, which is skipped
    when all have. At each node the leave_X methods chain: each gets the node as the previous patch left
    it when that is still an X, else the unchanged one. A patch rewriting a node that is or contains
    another patch's rewrite raises _Diverged (the sequential path handles that file) unless one of the
    two names the other in COMPOSES_WITH."""

    def __init__(self, commands: list[tuple[ModuleType, PatchCommand]]) -> None:
        super().__init__()
        self.commands = [command for _, command in commands]
        self.ids = [patch.PATCH.id for patch, _ in commands]
        self.blocked: list[cst.CSTNode | None] = [None] * len(commands)
        self.changed = [False] * len(commands)
        self.composes = [{j for j, other in enumerate(self.ids)
                          if other in getattr(command, "COMPOSES_WITH", ()) or self.ids[i] in
                          getattr(self.commands[j], "COMPOSES_WITH", ())} for i, command in enumerate(self.commands)]
        self._below: list[set[int] | None] = []  # per open node: the patches that rewrote inside it
        self._visits: dict[str, list] = {"Module": []}  # visit_Module runs before the traversal
        self._leaves: dict[str, list] = {}
        self._own = [_own_methods(type(command)) for command in self.commands]
        self.attributes = any(_is_attribute_method(name) for own in self._own for name in own)
        # no patch here has a visit_/leave_ method for whitespace, punctuation or operator tokens: the shared
        # traversal need not walk them (on_visit/on_leave would call nothing there)
        self.prune = fastwalk.NOTHING if self.attributes or any(
            fastwalk.handles_formatting(own) for own in self._own) else fastwalk.FORMATTING

    def _table(self, table: dict[str, list], prefix: str, name: str) -> list:
        """The patches that define prefix+name themselves (libcst's base classes have a no-op stub for
        every node type: calling those would be most of the traversal's cost)."""
        fns = table.get(name)
        if fns is None:
            fns = table[name] = [(i, getattr(command, prefix + name)) for i, command in enumerate(self.commands)
                                 if prefix + name in self._own[i]]
        return fns

    def _call(self, i: int, fn, *args):
        try:
            return fn(*args)
        except Exception as exc:  # SkipFile mid-way, or a patch tripping over another's rewrite
            raise _Diverged(f"{self.ids[i]}: {type(exc).__name__}") from exc

    def run(self, module: cst.Module) -> cst.Module:
        skipped = set()
        for i, command in enumerate(self.commands):
            try:
                if command.visit_Module(module) is False:
                    self.blocked[i] = module
            except SkipFile:
                skipped.add(i)
                self.blocked[i] = module
            except Exception as exc:  # the sequential path says whether it fails there too
                raise _Diverged(f"{self.ids[i]}: {type(exc).__name__}") from exc
        leaves = self._table(self._leaves, "leave_", "Module")
        self._leaves["Module"] = [(i, fn) for i, fn in leaves if i not in skipped]  # SkipFile: no leave either
        if all(b is not None for b in self.blocked):
            self._below.append(None)
            return self.on_leave(module, module)  # nobody wants the traversal: only leave_Module runs
        if self.prune is fastwalk.FORMATTING:
            # a patch whose visit_Module returned False gets no callback below the module: only the others'
            # methods say which leaf nodes (names, numbers, strings) the traversal must still visit
            live = {name for own, b in zip(self._own, self.blocked) if b is None for name in own}
            self.prune = fastwalk.FORMATTING | fastwalk.unhandled_leaves(live)
        return fastwalk.transform(module, self, self.attributes, self.prune)

    def on_visit(self, node: cst.CSTNode) -> bool:
        blocked = self.blocked
        name = type(node).__name__
        fns = self._visits.get(name)  # looked up here first: this runs for every node
        for i, fn in self._table(self._visits, "visit_", name) if fns is None else fns:
            if blocked[i] is None and self._call(i, fn, node) is False:
                blocked[i] = node
        self._below.append(None)
        return None in blocked

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):
        blocked = self.blocked
        kind = type(original_node)
        current = updated_node
        touched = self._below.pop()
        fns = self._leaves.get(kind.__name__)
        for i, fn in self._table(self._leaves, "leave_", kind.__name__) if fns is None else fns:
            if blocked[i] is not None and blocked[i] is not original_node:
                continue
            given = current if type(current) is kind else updated_node
            result = self._call(i, fn, original_node, given)
            if result is not given:
                if given is not current:
                    raise _Diverged(f"{self.ids[i]} rewrites a node another patch replaced")
                if touched and not touched <= self.composes[i] | {i}:
                    # run alone after the other, it would have seen that rewrite (and may have chosen otherwise)
                    raise _Diverged(f"{self.ids[i]} rewrites around another patch's rewrite")
                self.changed[i] = True
                current = result
                touched = (touched or set()) | {i}
        for i, b in enumerate(blocked):
            if b is original_node:
                blocked[i] = None
        if touched and self._below:
            self._below[-1] = (self._below[-1] or set()) | touched
        return current

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        for i, fn in self._table(self._visits, "visit_", f"{type(node).__name__}_{attribute}"):
            if self.blocked[i] is None:
                self._call(i, fn, node)

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        for i, fn in self._table(self._leaves, "leave_", f"{type(original_node).__name__}_{attribute}"):
            if self.blocked[i] is None:
                self._call(i, fn, original_node)


def _own_methods(cls: type) -> set[str]:
    """Names defined by the patch's own classes (PatchCommand's subclasses), not inherited from libcst."""
    return {name for klass in cls.__mro__ if issubclass(klass, PatchCommand) and klass is not PatchCommand
            for name in vars(klass)}


def _is_attribute_method(name: str) -> bool:
    """`visit_Call_func`, `leave_Arg_value`: libcst's per-attribute callbacks."""
    parts = name.split("_")
    return parts[0] in ("visit", "leave") and len(parts) >= 3 and parts[1][:1].isupper()


def unified_diff(old: str, new: str, label: str) -> str:
    """A `diff -u` style diff of two versions of one file, labelled a/<label> and b/<label>."""
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=f"a/{label.lstrip('/')}", tofile=f"b/{label.lstrip('/')}")
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


@dataclass
class FileOutcome:
    path: str
    changes: list[Change] = field(default_factory=list)
    diff: str = ""
    error: str | None = None
    written: bool = False


def _compile_error(text: str, path: str) -> str | None:
    """Python's own compile() of `text` (~10x cheaper than a libcst parse): None, or the first line of its error."""
    text = text[1:] if text.startswith(BOM) else text
    try:
        compile(text, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    return None


def _check_output(new: str, path: str, old: str) -> str | None:
    """Why the patched text must not be written, or None. A file this Python cannot compile even before
    patching (newer syntax, e.g. Python 3.12 f-strings under 3.11) is named as such, not as a bad patch."""
    problem = _compile_error(new, path)
    if problem is None:
        return None
    before = _compile_error(old, path)
    if before is not None:
        version = ".".join(map(str, sys.version_info[:2]))
        return (f"the file does not compile with this Python {version} even before patching ({before}); "
                "run the patcher with the Python the project uses; not written")
    return f"patched output does not compile ({problem}); not written"


def _atomic_write(path: str, data: bytes, mode: int) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".distdoctor", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, stat.S_IMODE(mode))
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def process_file(path: str, patch_ids: Sequence[str] | None = None, options: PatchOptions | None = None,
                 write: bool = False, label: str | None = None) -> FileOutcome:
    """Patch one file: report, and when `write` replace it atomically. Never raises for bad input."""
    registry = paths.patch_registry()

    label = label or path
    outcome = FileOutcome(label)
    try:
        selected = registry.all_patches() if patch_ids is None else [registry.get(i) for i in patch_ids]
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            outcome.error = "symbolic link, not followed"
            return outcome
        if not stat.S_ISREG(st.st_mode):
            outcome.error = "not a regular file"
            return outcome
        if st.st_size > MAX_FILE_BYTES:
            outcome.error = f"file too large ({st.st_size} bytes > {MAX_FILE_BYTES})"
            return outcome
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        outcome.error = f"unreadable: {exc.strerror or exc}"
        return outcome
    needles = prefilter_strings(selected)
    if needles and not any(n.encode() in data for n in needles):
        return outcome
    if b"\0" in data:
        outcome.error = "binary file (contains NUL bytes)"
        return outcome
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        outcome.error = f"not UTF-8 (invalid byte at offset {exc.start})"
        return outcome
    try:
        result = patch_source(source, selected, options, path=path)
    except cst.ParserSyntaxError as exc:
        outcome.error = f"syntax error at line {exc.raw_line}, column {exc.raw_column}: {exc.message}"
        return outcome
    except (PatchFailure, RecursionError) as exc:
        outcome.error = str(exc)
        return outcome
    if not result.changed:
        return outcome
    problem = _check_output(result.new_source, path, source)
    if problem:
        outcome.error = problem
        return outcome
    outcome.changes = result.changes
    outcome.diff = unified_diff(source, result.new_source, label)
    if write:
        if not st.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
            outcome.error = "read-only file; not written"
            return outcome
        try:
            now = os.lstat(path)
            if (now.st_mtime_ns, now.st_size) != (st.st_mtime_ns, st.st_size):
                outcome.error = "file changed while it was being patched; not written"
                return outcome
            _atomic_write(path, result.new_source.encode("utf-8"), st.st_mode)
            outcome.written = True
        except OSError as exc:
            outcome.error = f"cannot write: {exc.strerror or exc}; not written"
    return outcome


def _has_venv_marker(directory: str) -> bool:
    return os.path.isfile(os.path.join(directory, "pyvenv.cfg"))


TEST_DIRS = frozenset({"tests", "test"})


def is_test_file(name: str) -> bool:
    """pytest's default file names, plus conftest.py."""
    return name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"


def iter_python_files(root: str, include_tests: bool = True,
                      skipped_tests: list[str] | None = None) -> Iterator[tuple[str, str | None]]:
    """Yield (path, error) for every *.py file under root (a file or directory), skipping
    virtualenvs, VCS and build folders; symlinks are yielded with an error and never followed.
    Without include_tests, test folders and test files found by walking a directory are left out
    (appended to skipped_tests); a file named on its own is always yielded."""
    if os.path.islink(root):
        yield root, "symbolic link, not followed"
        return
    if not os.path.exists(root):
        yield root, "no such file or directory"
        return
    if os.path.isfile(root):
        yield (root, None) if root.endswith(".py") else (root, "not a Python file (*.py)")
        return
    if not os.path.isdir(root):
        yield root, "not a regular file or directory"
        return
    for directory, dirnames, filenames in os.walk(root, followlinks=False, onerror=None):
        keep = []
        for name in sorted(dirnames):
            full = os.path.join(directory, name)
            if name in SKIP_DIRS or _has_venv_marker(full):
                continue
            if not include_tests and name in TEST_DIRS and not os.path.islink(full):
                if skipped_tests is not None:
                    skipped_tests.extend(p for p, _ in iter_python_files(full) if p.endswith(".py"))
                continue
            if os.path.islink(full):
                yield full, "symbolic link, not followed"
                continue
            keep.append(name)
        dirnames[:] = keep
        for name in sorted(filenames):
            if not name.endswith(".py"):
                continue
            full = os.path.join(directory, name)
            if not include_tests and is_test_file(name):
                if skipped_tests is not None:
                    skipped_tests.append(full)
                continue
            yield (full, "symbolic link, not followed") if os.path.islink(full) else (full, None)


def default_env_prefix(path: str) -> str:
    """The repo's package name upper-cased, non-alphanumerics as `_` (nanochat/ -> NANOCHAT)."""
    p = Path(path).resolve()
    if p.is_file():
        p = p.parent
    if (p / "__init__.py").is_file():
        while (p.parent / "__init__.py").is_file():
            p = p.parent
        name = p.name
    else:
        ignore = {"tests", "test", "scripts", "examples", "docs", "benchmarks", "tools"}
        try:
            packages = sorted(d.name for d in p.iterdir() if d.is_dir() and not d.is_symlink()
                              and (d / "__init__.py").is_file() and d.name not in ignore
                              and not d.name.startswith((".", "_")))
        except OSError:
            packages = []
        name = packages[0] if len(packages) == 1 else p.name
    prefix = re.sub(r"[^A-Za-z0-9]", "_", name).upper().strip("_")
    if not prefix:
        return "DISTDOCTOR"
    return "_" + prefix if prefix[0].isdigit() else prefix


@dataclass
class Task:
    path: str
    label: str
    options: PatchOptions


def _run_task(args: tuple[Task, tuple[str, ...] | None, bool]) -> FileOutcome:
    task, patch_ids, write = args
    with gc_paused():
        try:
            return process_file(task.path, patch_ids, task.options, write=write, label=task.label)
        finally:
            cstutil.release()


def collect_tasks(roots: Sequence[str], env_prefix: str | None = None, include_tests: bool = True,
                  skipped_tests: list[str] | None = None) -> tuple[list[Task], list[FileOutcome]]:
    """Every file to process (deduplicated) and the paths that are refused up front."""
    tasks: list[Task] = []
    refused: list[FileOutcome] = []
    seen: set[str] = set()
    for root in roots:
        options = PatchOptions(env_prefix=env_prefix or (default_env_prefix(root) if os.path.exists(root)
                                                         else "DISTDOCTOR"))
        for path, error in iter_python_files(root, include_tests, skipped_tests):
            if error:
                refused.append(FileOutcome(path, error=error))
                continue
            real = os.path.realpath(path)
            if real in seen:
                continue
            seen.add(real)
            tasks.append(Task(path, path, options))
    return tasks, refused


def patch_paths(roots: Sequence[str], patch_ids: Sequence[str] | None = None, write: bool = False,
                jobs: int = 1, env_prefix: str | None = None,
                progress: Callable[[int, int], None] | None = None, include_tests: bool = True,
                skipped_tests: list[str] | None = None) -> list[FileOutcome]:
    """Process every *.py file under roots; outcomes in walk order (refused paths first). With
    include_tests=False, test folders and files met while walking are skipped (listed in skipped_tests)."""
    with gc_tuned():
        return _patch_paths(roots, patch_ids, write, jobs, env_prefix, progress, include_tests, skipped_tests)


GC_THRESHOLD = (20000, 20, 20)


@contextmanager
def gc_tuned() -> Iterator[None]:
    """Within: Python's cyclic garbage collector runs less often. Parsing builds hundreds of thousands of
    objects per file, and at the default thresholds (700, 10, 10) the collector's passes over them were
    11-20 % of the CPU time on torch's largest files, 4-5 % with these; what is collected is the same."""
    outer = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*outer)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Within (one file): no automatic garbage collection. Python's and libcst's parses of a large file
    allocate a million objects that live until the file is done, and the collector's passes over them
    (older generations included) were ~5 % of the CPU time on torch/testing even at GC_THRESHOLD. On exit
    the collector runs on the youngest generation, where the file's garbage cycles (scope objects) are,
    so memory stays bounded file by file."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect(0)


def _patch_paths(roots: Sequence[str], patch_ids: Sequence[str] | None, write: bool, jobs: int,
                 env_prefix: str | None, progress: Callable[[int, int], None] | None, include_tests: bool,
                 skipped_tests: list[str] | None) -> list[FileOutcome]:
    tasks, outcomes = collect_tasks(roots, env_prefix, include_tests, skipped_tests)
    ids = tuple(patch_ids) if patch_ids is not None else None
    work = [(t, ids, write) for t in tasks]
    done = 0
    if jobs > 1 and len(work) > 1:
        results: list[FileOutcome | None] = [None] * len(work)
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(_run_chunk, [(i, work[i]) for i in chunk]) for chunk in _chunks(tasks, jobs)]
            for future in as_completed(futures):
                for i, outcome in future.result():
                    results[i] = outcome
                    done += 1
                    if progress:
                        progress(done, len(work))
        outcomes += results  # type: ignore[arg-type]
    else:
        for item in work:
            outcomes.append(_run_task(item))
            done += 1
            if progress:
                progress(done, len(work))
    return outcomes


def _run_chunk(items: list[tuple[int, tuple[Task, tuple[str, ...] | None, bool]]]) -> list[tuple[int, FileOutcome]]:
    with gc_tuned():  # a worker process started by another method than fork does not inherit the thresholds
        return [(i, _run_task(item)) for i, item in items]


def _chunks(tasks: Sequence[Task], jobs: int) -> list[list[int]]:
    """Task indexes in work units for the pool, largest files first (a large file started last would
    leave the other workers idle at the end: one 500 KB file takes ~10 s); small files are grouped so
    that the pool's per-unit overhead stays small."""
    def size(task: Task) -> int:
        try:
            return os.stat(task.path).st_size
        except OSError:
            return 0

    sizes = [size(t) for t in tasks]
    limit = max(1, sum(sizes) // (jobs * 64))  # ~64 units per worker
    chunks: list[list[int]] = []
    current: list[int] = []
    total = 0
    for i in sorted(range(len(tasks)), key=lambda i: -sizes[i]):
        current.append(i)
        total += sizes[i]
        if total >= limit or len(current) >= 32:
            chunks.append(current)
            current, total = [], 0
    if current:
        chunks.append(current)
    return chunks


def _stderr_progress(done: int, total: int) -> None:
    if total >= 50 and (done % 100 == 0 or done == total):
        print(f"[patch] {done}/{total} files", file=sys.stderr, flush=True)
