"""Inputs: expand paths (files, folders of per-rank logs, '-' for stdin, .gz) and stream each one as
candidate lines with bounded memory, whatever the size or the length of a line."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
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
# compressed streams the standard library reads as it goes, by their magic bytes
_DECOMPRESS: tuple[tuple[bytes, Callable[[BinaryIO], BinaryIO]], ...] = (
    (GZIP_MAGIC, lambda s: gzip.GzipFile(fileobj=s, mode="rb")),  # type: ignore[arg-type,return-value]
    (b"BZh", lambda s: bz2.BZ2File(s, mode="rb")),  # type: ignore[arg-type,return-value]
    (b"\xfd7zXZ\x00", lambda s: lzma.LZMAFile(s, mode="rb")),  # type: ignore[arg-type,return-value]
)
# containers it cannot stream here: what to run instead
_UNREADABLE = (
    (b"\x28\xb5\x2f\xfd", "zstd-compressed: decompress it first (zstd -d FILE) or pipe it (zstd -dc FILE | ... -)"),
    (b"PK\x03\x04", "a zip archive: unzip it and pass the folder"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive: extract it and pass the folder"),
)


def _maybe_decompress(stream, name: str = "<input>") -> BinaryIO:
    """The stream itself, or a decompressing reader over it when it starts with the magic of gzip, bzip2 or xz;
    either one read as UTF-8 when it is UTF-16 text (_maybe_utf16). An archive or zstd stream: InputError."""
    head = stream.peek(6)[:6] if hasattr(stream, "peek") else b""
    for magic, why in _UNREADABLE:
        if head.startswith(magic):
            stream.close()
            raise InputError(f"{name}: {why}")
    for magic, reader in _DECOMPRESS:
        if head.startswith(magic) and (magic != b"BZh" or head[3:4].isdigit()):
            stream = reader(stream)
            break
    return _maybe_utf16(stream)


def _utf16_encoding(head: bytes) -> str | None:
    """"utf-16" for a byte-order mark (Windows PowerShell's `python train.py > log.txt` writes UTF-16LE with one);
    "utf-16-le"/"utf-16-be" for text without one whose every other byte is NUL; None for anything else."""
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return "utf-16"
    pairs = head[:len(head) // 2 * 2]
    if len(pairs) >= 16:
        for zeros, text, enc in ((pairs[1::2], pairs[0::2], "utf-16-le"), (pairs[0::2], pairs[1::2], "utf-16-be")):
            if zeros.count(0) == len(zeros) and text.count(0) == 0:
                return enc
    return None


class _Utf8Of16(io.RawIOBase):
    """A binary reader giving the UTF-8 of a UTF-16 stream, in bounded pieces (what spans() reads into)."""

    CHARS = 1 << 18

    def __init__(self, stream: BinaryIO, encoding: str) -> None:
        self._raw = stream
        self._text = io.TextIOWrapper(stream, encoding=encoding, errors="replace", newline="")  # type: ignore[arg-type]
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        while not self._pending:
            chunk = self._text.read(self.CHARS)
            if not chunk:
                return 0
            self._pending = chunk.encode("utf-8")
        n = min(len(b), len(self._pending))
        b[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def close(self) -> None:
        if not self.closed:
            self._text.detach()
            self._raw.close()
        super().close()


def _maybe_utf16(stream) -> BinaryIO:
    """The stream, or a UTF-8 reader over it when it holds UTF-16 text."""
    if not hasattr(stream, "peek"):
        return stream
    enc = _utf16_encoding(stream.peek(64)[:64])
    return _Utf8Of16(stream, enc) if enc else stream  # type: ignore[return-value]


def _opener(path: Path) -> Callable[[], BinaryIO]:
    return lambda: _maybe_decompress(open(path, "rb"), str(path))


def _stdin() -> BinaryIO:
    return _maybe_decompress(sys.stdin.buffer, "<stdin>")


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
    """(number of the block's first line, block of whole lines ending in b'\\n'), each its own bytes.

    Memory is bounded by BLOCK + MAX_LINE: a line longer than MAX_LINE is cut there (the rest of
    it is skipped) and still counts as one line.
    """
    for first, buf, start, end in spans(stream, stats, name):
        yield first, bytes(buf[start:end])


def spans(stream: BinaryIO, stats: ScanStats, name: str) -> Iterator[tuple[int, bytes | bytearray, int, int]]:
    """(first line number, buffer, start, end): buffer[start:end] is a block of whole lines as blocks() gives.

    One buffer is read into again and again (no new megabyte per block): a span is valid only until the next
    one is asked for.
    """
    buf = bytearray(MAX_LINE + BLOCK)
    view = memoryview(buf)
    count = _LineCounter()
    line_no = 1
    carry = 0          # bytes of a partial line kept at buf[:carry]
    skipping = False   # inside a line cut at MAX_LINE: its rest is dropped up to its newline
    first = True
    while True:
        n = stream.readinto(view[carry:carry + BLOCK])
        if not n:
            break
        stats.bytes += n
        if buf.find(b"\x00", carry, carry + n) >= 0:
            head = bytes(view[carry:carry + n])
            if first and _binary(head[:8192]):
                raise InputError(f"{name}: binary file (NUL bytes and non-text in the first 8 KiB), not a log")
            # a stray NUL is text's: torch's segfault handler writes its message's terminator ("...in worker.\n\0")
            # before the next line's rank prefix; dropped, the line reads as printed
            kept = head.replace(b"\x00", b"")
            buf[carry:carry + len(kept)] = kept
            n = len(kept)
        if _pasted(buf, carry, carry + n):  # never longer than what was read: the buffer's bound holds
            kept = _unpaste(bytes(view[carry:carry + n]))
            buf[carry:carry + len(kept)] = kept
            n = len(kept)
        first = False
        start, end = 0, carry + n
        if skipping:
            nl = buf.find(b"\n", start, end)
            if nl < 0:
                continue
            start, skipping = nl + 1, False
        last = buf.rfind(b"\n", start, end)
        if last >= 0:
            if last + 1 > start:
                yield line_no, buf, start, last + 1
                line_no += count(buf, start, last + 1)
            start = last + 1
        tail = end - start
        if tail > MAX_LINE:
            stats.cut_lines += 1
            yield line_no, bytes(view[start:start + MAX_LINE]) + b"\n", 0, MAX_LINE + 1
            line_no += 1
            carry, skipping = 0, True
        else:
            buf[:tail] = bytes(view[start:end])  # the partial last line goes first for the next read
            carry = tail
    if carry:
        yield line_no, bytes(view[:carry]) + b"\n", 0, carry + 1
        line_no += 1
    stats.lines += line_no - 1


# A log copied from a web page or scraped from its HTML: non-breaking spaces for spaces, HTML's entities for
# quotes and angle brackets ('File &quot;train.py&quot;, line 3', '-&gt;'), and a forum's typographer outside code
# blocks (Discourse's default: 'File “train.py”', 'torchrun –nproc_per_node'). All are read as the text printed.
_NBSP = b"\xc2\xa0"
_TYPOGRAPHER = ((b"\xe2\x80\x9c", b'"'), (b"\xe2\x80\x9d", b'"'), (b"\xe2\x80\x98", b"'"), (b"\xe2\x80\x99", b"'"),
                (b"\xe2\x80\x93", b"--"), (b"\xe2\x80\x94", b"---"))  # “ ” ‘ ’, en and em dash
_ENTITIES = ((b"&quot;", b'"'), (b"&#34;", b'"'), (b"&#39;", b"'"), (b"&#x27;", b"'"), (b"&apos;", b"'"),
             (b"&lt;", b"<"), (b"&gt;", b">"), (b"&amp;", b"&"))  # &amp; last: "&amp;lt;" reads "&lt;"


def _pasted(buf: bytearray, start: int, end: int) -> bool:
    """Whether buf[start:end] holds a non-breaking space, a typographer's mark or an HTML entity. Single bytes are
    looked for first (memchr: a plain ASCII log costs three fast passes); the marks only where those bytes occur."""
    return (buf.find(b"\xc2", start, end) >= 0 and buf.find(_NBSP, start, end) >= 0) or (
        buf.find(b"\xe2", start, end) >= 0 and any(buf.find(t, start, end) >= 0 for t, _ in _TYPOGRAPHER)) or (
        buf.find(b"&", start, end) >= 0 and any(buf.find(e, start, end) >= 0 for e, _ in _ENTITIES[:-1]))


def _unpaste(chunk: bytes) -> bytes:
    """The chunk with non-breaking spaces as spaces, typographer quotes and dashes as typed, and HTML's character
    entities decoded (never a newline added or taken: line numbers stay those of the file)."""
    chunk = chunk.replace(_NBSP, b" ")
    if b"\xe2\x80" in chunk:
        for mark, plain in _TYPOGRAPHER:
            chunk = chunk.replace(mark, plain)
    if b"&" in chunk:
        for entity, char in _ENTITIES:
            chunk = chunk.replace(entity, char)
    return chunk


def _binary(head: bytes) -> bool:
    """A binary file: NUL bytes in more than 1% of the input's first bytes, or NULs among bytes that are mostly not
    text (control bytes, invalid UTF-8: a core dump, an image, random data). A log has at most a stray NUL."""
    nuls = head.count(b"\x00")
    if nuls > max(1, len(head) // 100):
        return True
    if not nuls:
        return False
    text = head.decode("utf-8", errors="replace")
    odd = sum(ch == "\ufffd" or (ch < " " and ch not in "\t\n\r\f\v\b\x1b") for ch in text)
    return odd > len(text) * _NOT_TEXT


_NOT_TEXT = 0.3  # share of a head's characters that are not text beyond which a file with NULs is binary


class _LineCounter:
    """Newlines in a span: bytes.count, or numpy (several times faster) once an input proves big."""

    BIG = 16  # spans before numpy is worth its import

    def __init__(self) -> None:
        self.calls = 0
        self.np = None
        self.eq = None

    def __call__(self, buf, start: int, end: int) -> int:
        self.calls += 1
        if self.calls == self.BIG:
            try:
                import numpy as np
                self.np, self.eq = np, np.empty(MAX_LINE + BLOCK, dtype=bool)
            except ImportError:
                pass
        if self.np is None or not isinstance(buf, bytearray):
            return buf.count(b"\n", start, end)
        out = self.eq[:end - start]
        self.np.equal(self.np.frombuffer(buf, self.np.uint8, end - start, start), 10, out=out)
        return int(self.np.count_nonzero(out))
