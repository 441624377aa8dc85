"""Run the rules over files and repositories: walk, prefilter, parse once, check, follow calls, suppress.

Files are found by the patch engine's walker (virtualenvs, VCS and build folders skipped, symlinks never
followed). Each file is read, prefiltered by substrings, parsed once by libcst into a FileModel and given to
every selected rule; repository-wide steps (the call graph, "is set_epoch called anywhere") run once per
PATH argument over the facts the files left. Nothing is imported or executed.
"""

from __future__ import annotations

import os
import re
import stat
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from types import ModuleType
from typing import Callable, Iterable, Sequence

import libcst as cst

from distdoctor.check import rules as registry
from distdoctor.check.api import is_distributed
from distdoctor.check.base import FileResult, Finding
from distdoctor.check.model import FileModel
from distdoctor.patching.engine import BOM, MAX_FILE_BYTES, iter_python_files

# a file is parsed only if it contains one of these (every rule looks at distributed code)
PREFILTER = ("distributed", "dist.", "barrier", "all_reduce", "DDP", "FSDP", "fully_shard", "rank", "spawn",
             "accelerat", "deepspeed", "isend", "irecv", "RANK", "Sampler")
NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
FILE_NOQA = re.compile(r"#\s*distdoctor:\s*(?:noqa|ignore)(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?",
                       re.IGNORECASE)


def select_rules(select: Iterable[str] = (), ignore: Iterable[str] = ()) -> list[ModuleType]:
    """Rules whose code starts with a --select prefix (all when empty) and with no --ignore prefix."""
    select, ignore = [s.upper() for s in select], [s.upper() for s in ignore]
    known = registry.codes()
    for code in select + ignore:
        if code != "ALL" and not any(k.startswith(code) for k in known):
            raise ValueError(f"unknown rule code {code!r} (known: {', '.join(known)})")
    chosen = [m for m in registry.all_rules()
              if not select or "ALL" in select or any(m.RULE.code.startswith(s) for s in select)]
    return [m for m in chosen if not any(m.RULE.code.startswith(i) for i in ignore)]


def _codes(text: str | None) -> frozenset[str] | None:
    return None if not text else frozenset(c.upper() for c in re.split(r"[\s,]+", text.strip()) if c)


def _suppressions(module: cst.Module, model: FileModel, result: FileResult) -> None:
    """`# noqa` / `# noqa: DD101` on a line, `# distdoctor: noqa[: DD101]` anywhere for the whole file."""
    from distdoctor.patching.cstutil import walk

    for node in walk(module):
        if not isinstance(node, cst.Comment):
            continue
        whole = FILE_NOQA.search(node.value)
        if whole:
            codes = _codes(whole.group("codes"))
            result.file_noqa = None if codes is None or result.file_noqa is None else result.file_noqa | codes
            continue
        found = NOQA.search(node.value)
        if found:
            line = model.pos(node)[0]
            codes = _codes(found.group("codes"))
            previous = result.noqa.get(line, frozenset())
            result.noqa[line] = None if codes is None or previous is None else previous | codes


def check_source(source: str, path: str = "<string>", rules: Sequence[ModuleType] | None = None,
                 prefilter: bool = True) -> FileResult:
    """Every rule over one source text; raises libcst.ParserSyntaxError for unparsable input. Without
    `prefilter`, a file with none of the prefilter words is parsed too (the call graph asked for it)."""
    rules = registry.all_rules() if rules is None else rules
    result = FileResult(path)
    text = source[1:] if source.startswith(BOM) else source
    if prefilter and not any(s in text for s in PREFILTER):
        return result
    model = FileModel(text, path)
    for rule in rules:
        rule.check(model, result)
    keys = [(model.callee_key(s), s) for s in model.sites]
    result.extra["guarded_calls"] = {k for k, s in keys if k and s.guard is not None and s.guard.polarity != "data"}
    # a call in a program that is not distributed (a chat script calling merge_lora) runs in one process:
    # it does not make the function one that every rank runs
    distributed = is_distributed(model)
    result.extra["open_calls"] = {k for k, s in keys if k and not _covered(s)} if distributed else set()
    # caller -> callee edges for the transitive guard (engine._guarded_only); an uncovered call counts only
    # where open_calls would count it
    result.extra["call_edges"] = {
        (None if s.func.name == "<module>" else s.func.key, k, _covered(s)) for k, s in keys
        if k and (distributed or _covered(s))}
    could_report = result.findings or result.pending or any(
        isinstance(v, dict) and v.get("guarded") for v in result.extra.values())
    if could_report and ("noqa" in text or "distdoctor:" in text):
        _suppressions(model.module, model, result)
    return result


def check_file(path: str, label: str | None = None, codes: Sequence[str] | None = None,
               screened: bool = False, wanted: bool = False) -> FileResult:
    """One file: read, refuse what is not UTF-8 Python text, check. Never raises for bad input. With
    `screened`, a file the cheap screen (distdoctor/check/screen.py) finds nothing in is not parsed: its
    result has `extra["screened_out"]`, the names it defines, for the call graph to ask for it later;
    `wanted` is that later call: the file is parsed whatever it contains."""
    label = label or path
    rules = registry.all_rules() if codes is None else [registry.get(c) for c in codes]
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode):
            return FileResult(label, error="not a regular file")
        if st.st_size > MAX_FILE_BYTES:
            return FileResult(label, error=f"file too large ({st.st_size} bytes > {MAX_FILE_BYTES})")
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        return FileResult(label, error=f"unreadable: {exc.strerror or exc}")
    if b"\0" in data:
        return FileResult(label, error="binary file (contains NUL bytes)")
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return FileResult(label, error=f"not UTF-8 (invalid byte at offset {exc.start})")
    if screened:
        from distdoctor.check.screen import def_names, screen

        if any(s in source for s in PREFILTER):
            worth, defs = screen(source[1:] if source.startswith(BOM) else source)
        else:  # nothing distributed in it; it may still relay a call to a function that is
            worth, defs = False, def_names(source)
        if not worth:
            result = FileResult(label)
            result.extra["screened_out"] = defs
            return result
    try:
        if not wanted:
            return check_source(source, label, rules)
        # parsed for the call graph only: the other rules keep the prefilter's verdict, and a file with no
        # distributed word in it runs in one process (its calls do not make a function every rank's)
        result = check_source(source, label, [r for r in rules if hasattr(r, "finish")], prefilter=False)
        if not any(s in source for s in PREFILTER):
            result.extra["open_calls"] = set()
            result.extra["call_edges"] = {e for e in result.extra.get("call_edges", set()) if e[2]}
        return result
    except cst.ParserSyntaxError as exc:
        return FileResult(label, error=f"syntax error at line {exc.raw_line}, column {exc.raw_column}: "
                                       f"{exc.message.splitlines()[0] if exc.message else 'invalid syntax'}")
    except RecursionError:
        return FileResult(label, error="too deeply nested to parse")


def finish(results: list[FileResult], rules: Sequence[ModuleType]) -> list[Finding]:
    """Repository-wide steps and pending findings of one group of files (one PATH argument)."""
    marks = set().union(*(r.marks for r in results)) if results else set()
    repo_guarded_only = _guarded_only(results)
    transitive = _transitively_guarded(results)
    findings = [f for r in results for f in r.findings]
    for r in results:
        for p in r.pending:
            if p.unless & marks or (p.when and not p.when & marks):
                continue
            if p.func and (p.func in _guarded_only([r], repo_guarded_only) or p.func in transitive):
                continue
            findings.append(p.finding)
    for rule in rules:
        if hasattr(rule, "finish"):
            findings += rule.finish(results)
    by_path = {r.path: r for r in results}
    return sorted({f for f in findings if not _suppressed(f, by_path.get(f.path))}, key=Finding.sort_key)


def _covered(site) -> bool:
    """The call runs on some ranks only (not a per-rank data test), or after the main process went first."""
    return site.guard is not None and site.guard.polarity != "data" or site.main_first


def _transitively_guarded(results: list[FileResult]) -> set[str]:
    """Functions every call of which runs under a guard or inside a function that is itself guarded-only,
    to a fixpoint over the repository's call graph (least fixpoint: a recursive call justifies nothing).
    Module-level calls are roots: an uncovered one keeps its callee open."""
    covered: dict[str, set] = {}
    open_by: dict[str, set] = {}
    for r in results:
        for caller, callee, is_covered in r.extra.get("call_edges", set()):
            (covered if is_covered else open_by).setdefault(callee, set()).add(caller)
    done: set[str] = set()
    changed = True
    while changed:
        changed = False
        for f in set(covered) | set(open_by):
            if f in done:
                continue
            opens = open_by.get(f, set())
            if all(c is not None and c in done for c in opens) and (covered.get(f) or opens):
                done.add(f)
                changed = True
    return done


def _guarded_only(results: list[FileResult], fallback: set[str] | None = None) -> set[str]:
    """Functions every call of which (at least one) runs on some ranks only. With `fallback`, a function
    this file never calls is judged by the repository's calls (the fallback set)."""
    guarded: set[str] = set()
    open_: set[str] = set()
    for r in results:
        guarded |= r.extra.get("guarded_calls", set())
        open_ |= r.extra.get("open_calls", set())
    if fallback is None:
        return guarded - open_
    return (guarded - open_) | {f for f in fallback if f not in guarded and f not in open_}


def _suppressed(f: Finding, result: FileResult | None) -> bool:
    if result is None:
        return False
    if result.file_noqa is None or f.code in result.file_noqa:
        return True
    if f.line in result.noqa:
        codes = result.noqa[f.line]
        return codes is None or f.code in codes
    return False


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    files: int = 0
    skipped_tests: list[str] = field(default_factory=list)


def _run(args: tuple[str, tuple[str, ...], bool]) -> FileResult:
    path, codes, screened = args
    return check_file(path, path, codes, screened, wanted=not screened)


def _wanted_names(results: list[FileResult]) -> set[str]:
    """Bare names of the functions a rank-guarded call may reach: the guarded callees, then the plain
    functions those call, and so on (the call graph needs their definitions, wherever they are). Method
    calls met on the way (`obj.run()`) are not followed into unparsed files: their names are too common."""
    calls: dict[str, set[str]] = {}
    wanted: set[str] = set()
    for r in results:
        facts = r.extra.get("DD101") or {}
        for caller, callees in facts.get("calls", {}).items():
            calls.setdefault(caller.split(":", 1)[-1], set()).update(
                k.split(":", 1)[-1] for k in callees if k.startswith("fn:"))
        wanted |= {g[0].split(":", 1)[-1] for g in facts.get("guarded", [])}
    frontier = set(wanted)
    while frontier:
        frontier = set().union(*(calls.get(n, set()) for n in frontier)) - wanted
        wanted |= frontier
    return wanted


def _map(work: list, jobs: int, step: Callable[[FileResult], None]) -> None:
    if jobs > 1 and len(work) > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            for result in pool.map(_run, work, chunksize=max(1, min(16, len(work) // (jobs * 4) or 1))):
                step(result)
    else:
        for item in work:
            step(_run(item))


def check_paths(roots: Sequence[str], select: Iterable[str] = (), ignore: Iterable[str] = (), jobs: int = 1,
                include_tests: bool = True, progress: Callable[[int, int], None] | None = None) -> Report:
    """Check every *.py file under roots; each root is one repository for the call graph and pending rules."""
    rules = select_rules(select, ignore)
    codes = tuple(m.RULE.code for m in rules)
    report = Report()
    groups: list[list[str]] = []
    seen: set[str] = set()
    for root in roots:
        group = []
        for path, error in iter_python_files(root, include_tests, report.skipped_tests):
            if error:
                report.errors.append((path, error))
                continue
            real = os.path.realpath(path)
            if real not in seen:
                seen.add(real)
                group.append(path)
        groups.append(group)
    work = [(p, codes, True) for g in groups for p in g]
    report.files = len(work)
    results: dict[str, FileResult] = {}
    done = 0

    def step(result: FileResult) -> None:
        nonlocal done
        results[result.path] = result
        done += 1
        if progress:
            progress(min(done, len(work)), len(work))

    _map(work, jobs, step)
    # files the screen left out are parsed after all when a parsed file calls a function they define
    while True:
        parsed = [r for r in results.values() if "screened_out" not in r.extra]
        wanted = _wanted_names(parsed)
        again = [(r.path, codes, False) for r in results.values()
                 if "screened_out" in r.extra and r.extra["screened_out"] & wanted]
        if not again:
            break
        done -= len(again)
        _map(again, jobs, step)
    for r in results.values():
        r.extra.pop("screened_out", None)
    for group in groups:
        members = [results[p] for p in group]
        report.errors += [(r.path, r.error) for r in members if r.error]
        report.findings += finish([r for r in members if not r.error], rules)
    return report
