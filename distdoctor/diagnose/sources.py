"""Inputs: expand paths (files, folders of per-rank logs, '-' for stdin, .gz) and stream each one as
candidate lines with bounded memory, whatever the size or the length of a line."""

from __future__ import annotations

import gzip
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

from distdoctor.diagnose.prefixes import rank_from_path

BLOCK = 1 << 20          # bytes read at a time
MAX_LINE = 64 * 1024     # longer lines are cut to this many bytes for matching
MAX_FILES = 100_000      # files taken from folders
LOG_SUFFIXES = (".log", ".txt", ".out", ".err", ".gz", ".stderr", ".stdout")


class InputError(Exception):
    """An input that cannot be read; str() is one line naming the path and why."""


@dataclass
class Source:
    name: str                      # path as shown in evidence
    open: Callable[[], BinaryIO]
    rank_hint: int | None = None   # rank named by the file name (rank_3.log, attempt_0/3/stderr.log)
    explicit: bool = True          # named on the command line (errors there are input errors)


@dataclass
class ScanStats:
    bytes: int = 0
    lines: int = 0
    candidates: int = 0
    cut_lines: int = 0
    invalid_utf8: bool = False
    notes: list[str] = field(default_factory=list)


GZIP_MAGIC = b"\x1f\x8b"


def _maybe_gunzip(stream) -> BinaryIO:
    """The stream itself, or a decompressing reader over it when it starts with gzip's magic."""
    head = stream.peek(2)[:2] if hasattr(stream, "peek") else b""
    return gzip.GzipFile(fileobj=stream, mode="rb") if head == GZIP_MAGIC else stream  # type: ignore[return-value]


def _opener(path: Path) -> Callable[[], BinaryIO]:
    return lambda: _maybe_gunzip(open(path, "rb"))


def _stdin() -> BinaryIO:
    return _maybe_gunzip(sys.stdin.buffer)


def expand(paths: list[str], errors: list[dict]) -> Iterator[Source]:
    """Sources for files, folders (recursively, sorted) and '-'; unreadable ones go to `errors`."""
    for raw in paths:
        if raw == "-":
            yield Source("<stdin>", _stdin, None)
            continue
        p = Path(raw)
        if not os.path.lexists(p):
            errors.append({"path": raw, "error": f"{raw}: no such file or folder"})
            continue
        if p.is_dir():
            count = 0
            for dirpath, dirnames, filenames in os.walk(p, onerror=lambda e: errors.append(
                    {"path": str(e.filename), "error": f"{e.filename}: cannot list folder: {e.strerror}"})):
                dirnames.sort()
                for fn in sorted(filenames):
                    fp = Path(dirpath) / fn
                    if fp.is_symlink() and not fp.exists():
                        errors.append({"path": str(fp), "error": f"{fp}: broken symbolic link", "explicit": False})
                        continue
                    if not fp.is_file():
                        continue
                    if count >= MAX_FILES:
                        errors.append({"path": raw, "error": f"{raw}: more than {MAX_FILES} files; the rest were skipped", "explicit": False})
                        break
                    count += 1
                    rel = str(fp.relative_to(p))
                    yield Source(str(fp), _opener(fp), rank_from_path(rel), explicit=False)
                else:
                    continue
                break
            if count == 0:
                errors.append({"path": raw, "error": f"{raw}: folder holds no files", "explicit": False})
            continue
        if not p.is_file():
            errors.append({"path": raw, "error": f"{raw}: not a regular file"})
            continue
        yield Source(raw, _opener(p), rank_from_path(str(p)))


def blocks(stream: BinaryIO, stats: ScanStats, name: str) -> Iterator[tuple[int, bytes]]:
    """(number of the block's first line, block of whole lines ending in b'\\n').

    Memory is bounded by BLOCK + MAX_LINE: a line longer than MAX_LINE is cut there (the rest of
    it is skipped) and still counts as one line.
    """
    line_no = 1
    carry = b""
    skipping = False
    first = True
    while True:
        chunk = stream.read(BLOCK)
        if not chunk:
            break
        stats.bytes += len(chunk)
        if first:
            first = False
            if b"\x00" in chunk[:8192]:
                raise InputError(f"{name}: binary file (NUL bytes in the first 8 KiB), not a log")
        if skipping:
            nl = chunk.find(b"\n")
            if nl < 0:
                continue
            chunk = chunk[nl + 1:]
            skipping = False
        last_in_chunk = chunk.rfind(b"\n")
        if last_in_chunk >= 0:
            # one copy at most: the carried partial line joined to the chunk's whole lines
            if last_in_chunk + 1 == len(chunk):
                block, carry = (carry + chunk if carry else chunk), b""
            else:
                block = carry + memoryview(chunk)[:last_in_chunk + 1]
                carry = chunk[last_in_chunk + 1:]
            if len(carry) > MAX_LINE:
                stats.cut_lines += 1
                carry, skipping = carry[:MAX_LINE], True
                yield line_no, block
                line_no += block.count(b"\n")
                yield line_no, carry + b"\n"
                line_no += 1
                carry = b""
                continue
            yield line_no, block
            line_no += block.count(b"\n")
            continue
        # no newline in this chunk (and never one in carry): the same line goes on
        data = carry + chunk if carry else chunk
        if len(data) > MAX_LINE:
            stats.cut_lines += 1
            yield line_no, data[:MAX_LINE] + b"\n"
            line_no += 1
            carry = b""
            skipping = True
        else:
            carry = data
    if carry:
        yield line_no, carry + b"\n"
        line_no += 1
    stats.lines += line_no - 1
