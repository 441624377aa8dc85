"""Read the user's source at a reported frame with libcst (never importing it): the blocks that enclose a
line — branches (and whether their test is on the rank), loops, functions and their decorators."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

# identifiers that say "which rank am I": rank, local_rank, is_main_process(), trainer.is_global_zero, ...
RANK_NAME = re.compile(r"(^|_)(rank|rank0|rank_zero|global_rank|local_rank|ddp_rank|node_rank|process_index)$"
                       r"|^(is_)?(main|master)(_process)?$|^is_(local_)?(main|master)|^get_rank$|is_global_zero"
                       r"|is_rank_zero|is_world_process_zero|^RANK$|^LOCAL_RANK$", re.IGNORECASE)
RANK_DECORATOR = re.compile(r"rank_?zero|main_process|master_only|rank0|on_rank_0|local_main", re.IGNORECASE)


@dataclass(frozen=True)
class Block:
    kind: str  # if | for | while | def | with
    file: str
    line: int  # the header's line
    header: str  # e.g. "if rank == 0:", "for batch in batches:", "def save(...)"
    on_rank: bool = False  # an `if` whose test reads the rank, or a def with a rank-zero-only decorator
    branch: str = ""  # for an if: "body" or "else" (which side the line is on)

    @property
    def key(self) -> tuple[str, int]:
        return self.file, self.line


class _Names(cst.CSTVisitor):
    def __init__(self) -> None:
        self.names: list[str] = []

    def visit_Name(self, node: cst.Name) -> None:
        self.names.append(node.value)


def names_in(node: cst.CSTNode) -> list[str]:
    """Identifiers read by an expression: names, attribute names, called functions."""
    visitor = _Names()
    node.visit(visitor)
    return visitor.names


def reads_rank(node: cst.CSTNode) -> bool:
    return any(RANK_NAME.search(n) for n in names_in(node))


class _Chain(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, module: cst.Module, file: str, line: int) -> None:
        self.module, self.file, self.line = module, file, line
        self.blocks: list[Block] = []

    def _contains(self, node: cst.CSTNode) -> bool:
        pos = self.get_metadata(PositionProvider, node)
        return pos.start.line <= self.line <= pos.end.line

    def _start(self, node: cst.CSTNode) -> int:
        return self.get_metadata(PositionProvider, node).start.line

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.BaseStatement, cst.IndentedBlock, cst.Else)) and not self._contains(node):
            return False
        code = self.module.code_for_node
        if isinstance(node, cst.If):
            in_body = self._contains(node.body)
            self.blocks.append(Block("if", self.file, self._start(node.test), f"if {code(node.test)}:",
                                     reads_rank(node.test), "body" if in_body else "else"))
        elif isinstance(node, cst.For):
            self.blocks.append(Block("for", self.file, self._start(node.target),
                                     f"for {code(node.target)} in {code(node.iter)}:", reads_rank(node.iter)))
        elif isinstance(node, cst.While):
            self.blocks.append(Block("while", self.file, self._start(node.test), f"while {code(node.test)}:",
                                     reads_rank(node.test)))
        elif isinstance(node, cst.FunctionDef):
            decorators = [code(d.decorator) for d in node.decorators]
            line = self._start(node.decorators[0]) if node.decorators else self._start(node.name)
            self.blocks.append(Block("def", self.file, line, "".join(f"@{d} " for d in decorators)
                                     + f"def {node.name.value}(...)",
                                     any(RANK_DECORATOR.search(d) for d in decorators)))
        return True


@lru_cache(maxsize=512)
def _parse(file: str) -> MetadataWrapper | None:
    try:
        return MetadataWrapper(cst.parse_module(Path(file).read_bytes()))
    except (OSError, cst.ParserSyntaxError, UnicodeDecodeError):
        return None


@lru_cache(maxsize=4096)
def enclosing(file: str | None, line: int | None) -> tuple[Block, ...]:
    """The blocks around file:line, outermost first; () when the file cannot be read or parsed here."""
    if not file or not line:
        return ()
    wrapper = _parse(file)
    if wrapper is None:
        return ()
    chain = _Chain(wrapper.module, file, line)
    wrapper.visit(chain)
    return tuple(chain.blocks)


def line_text(file: str | None, line: int | None) -> str:
    """The stripped text of one line of a file (for people; never parsed from)."""
    try:
        return Path(file).read_text(errors="replace").splitlines()[line - 1].strip() if file and line else ""
    except (OSError, IndexError):
        return ""
