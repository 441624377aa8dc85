"""A cheap first look with Python's own (C) parser: is a file worth a libcst parse for the checker?

Like the patches' screens, it only decides whether to look; every finding still comes from libcst. A file
passes when it calls something a rule judges (a collective, a save, a logger, mp.spawn, a seed, ...), tests a
rank, holds hand-made shards, an epoch loop or a model forward with a branch. A file that does not pass is
parsed later only if another file calls a function it defines (the call graph follows it then).
"""

from __future__ import annotations

import ast
import warnings

from distdoctor.check import api, model
from distdoctor.patching.cstutil import ast_ident

CALLS = frozenset(api.COLLECTIVES | api.COLLECTIVE_METHODS | api.ACCELERATOR_COLLECTIVES | api.FULL_STATE
                  | api.DCP | api.DDP_WRAPPERS | api.SHARDED_WRAPPERS) | frozenset({
    "init_process_group", "destroy_process_group", "spawn", "start_processes", "isend", "irecv",
    "batch_isend_irecv", "DistributedSampler", "set_epoch", "SummaryWriter", "init", "start_run", "init_run",
    "Experiment", "Run", "urlretrieve", "download_url", "download_and_extract_archive", "download_url_to_file",
    "manual_seed", "manual_seed_all", "seed", "set_seed", "seed_everything", "save", "save_pretrained",
    "save_to_disk", "makedirs", "mkdir", "open", "load", "initialize", "prepare", "prepare_model",
    "broadcast_parameters", "replicate", "parallelize_module", "setup", "setup_module", "generate"})


def _rankish(node: ast.AST) -> bool:
    for n in ast.walk(node):
        name = ast_ident(n.func) if isinstance(n, ast.Call) else ast_ident(n)
        if name and (name.lower() in model.RANK_IDENTS or model.MAIN_FLAG.match(name.lower())
                     or name in model.NAN_CHECKS):
            return True
    return False


def def_names(text: str) -> frozenset[str]:
    """Names after `def` / `class` at the start of a line: which functions a file that is not parsed may
    define (a superset is fine: it only decides whether the call graph parses the file later)."""
    out = set()
    for line in text.splitlines():
        words = line.lstrip().replace("(", " ").replace(":", " ").split()
        if len(words) >= 2 and words[0] in ("def", "class"):
            out.add(words[1])
        elif len(words) >= 3 and words[:2] == ["async", "def"]:
            out.add(words[2])
    return frozenset(out)


def screen(text: str) -> tuple[bool, frozenset[str]]:
    """(worth a libcst parse, names of the functions and classes the file defines)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True, frozenset()  # libcst parses it and says what is wrong
    defs = frozenset(n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                          ast.ClassDef)))
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            if ast_ident(n.func) in CALLS or any(k.arg == "download" for k in n.keywords):
                return True, defs
        elif isinstance(n, (ast.If, ast.While)):
            if _rankish(n.test):
                return True, defs
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if n.name == "forward" or any(ast_ident(d.func if isinstance(d, ast.Call) else d)
                                          in model.RANK_ZERO_DECORATORS for d in n.decorator_list):
                return True, defs
        elif isinstance(n, ast.For) and "epoch" in ast.dump(n.target).lower():
            return True, defs
        elif isinstance(n, ast.Subscript) and (isinstance(n.slice, ast.Slice) or _rankish(n.slice)):
            if _rankish(n.slice):
                return True, defs
        elif isinstance(n, ast.With) and any(
                (ast_ident(i.context_expr.func) if isinstance(i.context_expr, ast.Call) else None)
                in model.MAIN_FIRST for i in n.items):
            return True, defs
    return False, defs
