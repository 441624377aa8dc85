"""Inventory of the failure messages an installed torch prints from torch.distributed, and our coverage of them.

    python -m distdoctor.evals.torch_messages --torch-root PATH [--coverage] [--uncovered]
    python -m distdoctor.evals.torch_messages --messages FILE --coverage   # an inventory taken elsewhere (a GPU machine)
    python -m distdoctor.evals.torch_messages --strings FILE --strings-name libtorch_cuda.so --coverage
        # the printable strings of a library, one a line, taken where it is installed (no CUDA build here)

Python messages: string literals and f-string constant parts of `raise X(...)`, `warnings.warn(...)` and
`logger.error/warning/exception/critical(...)` calls under torch/distributed/**, read with libcst (never
imported). C++ messages: printable strings of torch/lib/libtorch_cpu.so (and libtorch_cuda.so) naming c10d,
ProcessGroup, Gloo, NCCL, TCPStore, Work, watchdog or rendezvous. Each message is a template in which `{}`
marks a field; `--coverage` fills the fields with typical values, feeds the line through the matcher and
reports which cause it diagnoses to. Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import re
import string
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

LOG_METHODS = {"error", "warning", "warn", "exception", "critical", "fatal"}
CXX_WORDS = re.compile(r"ProcessGroup|c10d|Gloo|gloo|NCCL|TCPStore|\bWork\b|[Ww]atchdog|[Rr]endezvous|[Ss]ocket|\bpeer\b"
                       r"|collectives?\b")
FIELD = "{}"
_PRINTF = re.compile(r"%(?:[-+ #0]*\d*(?:\.\d+)?)(?:l{0,2}|z|h)?[sdiuxXfgp]")


@dataclass
class Message:
    source: str  # "py" or "cxx"
    where: str  # file:line (Python) or library name (C++)
    kind: str  # exception type, "warn", "logger.<level>", or "string"
    template: str  # the text, `{}` for each field


def _template(node) -> str | None:
    """The constant text of a libcst message expression, `{}` for every part computed at run time (None: no text)."""
    import libcst as cst

    if isinstance(node, cst.SimpleString):
        v = node.evaluated_value
        return v.decode("latin-1") if isinstance(v, bytes) else v
    if isinstance(node, cst.ConcatenatedString):
        left, right = _template(node.left), _template(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, cst.FormattedString):
        parts = []
        for p in node.parts:
            parts.append(p.value if isinstance(p, cst.FormattedStringText) else FIELD)
        return "".join(parts)
    if isinstance(node, cst.BinaryOperation):
        left = _template(node.left)
        if isinstance(node.operator, cst.Modulo) and left is not None:
            return _PRINTF.sub(FIELD, left)
        if isinstance(node.operator, cst.Add):
            right = _template(node.right)
            if left is None and right is None:
                return None
            return (left if left is not None else FIELD) + (right if right is not None else FIELD)
        return None
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "format":
        base = _template(node.func.value)
        if base is None:
            return None
        try:  # "{name}" / "{0:.2f}" fields become `{}`
            return "".join(lit + (FIELD if name is not None else "") for lit, name, _, _ in string.Formatter().parse(base))
        except ValueError:
            return base
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "join":
        return None
    return None


def _callee(func) -> str:
    import libcst as cst

    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return _callee(func.value) + "." + func.attr.value
    return ""


def _collector(where: str):
    """A libcst visitor that collects the messages of one module (libcst is imported only here: the C++ part of the
    inventory runs where it is not installed)."""
    import libcst as cst
    from libcst.metadata import PositionProvider

    class Collector(cst.CSTVisitor):
        METADATA_DEPENDENCIES = (PositionProvider,)

        def __init__(self):
            super().__init__()
            self.found: list[Message] = []

        def _add(self, node, kind: str, arg) -> None:
            text = _template(arg)
            if text and text.strip(" {}.:"):
                line = self.get_metadata(PositionProvider, node).start.line
                if kind.startswith("logger."):  # the logger fills %s fields lazily from its other arguments
                    text = _PRINTF.sub(FIELD, text)
                self.found.append(Message("py", f"{where}:{line}", kind, " ".join(text.split())))

        def visit_Raise(self, node) -> None:
            exc = node.exc
            if isinstance(exc, cst.Call) and exc.args:
                self._add(node, _callee(exc.func).rsplit(".", 1)[-1], exc.args[0].value)

        def visit_Call(self, node) -> None:
            name = _callee(node.func)
            if not node.args:
                return
            if name in ("warnings.warn", "warn"):
                self._add(node, "warn", node.args[0].value)
            elif "." in name and name.rsplit(".", 1)[1] in LOG_METHODS and "log" in name.rsplit(".", 1)[0].lower():
                self._add(node, "logger." + name.rsplit(".", 1)[1], node.args[0].value)

    return Collector()


def python_messages(torch_root: Path) -> list[Message]:
    import libcst as cst
    from libcst.metadata import MetadataWrapper

    out: list[Message] = []
    for path in sorted((torch_root / "distributed").rglob("*.py")):
        rel = path.relative_to(torch_root.parent).as_posix()
        if "/_testing" in rel or "/testing/" in rel:
            continue
        try:
            module = cst.parse_module(path.read_text(encoding="utf-8"))
        except (cst.ParserSyntaxError, UnicodeDecodeError):
            continue
        visitor = _collector(rel)
        MetadataWrapper(module).visit(visitor)
        out.extend(visitor.found)
    return out


def _strings(data: bytes, min_len: int = 16):
    for m in re.finditer(rb"[\x20-\x7e\t]{%d,}" % min_len, data):
        yield m.group().decode("ascii")


def cxx_messages(torch_root: Path) -> list[Message]:
    """Message-like strings (several words, a c10d keyword) of torch's C++ libraries."""
    out: list[Message] = []
    for name in ("libtorch_cpu.so", "libtorch_cuda.so"):
        lib = torch_root / "lib" / name
        if lib.exists():
            out.extend(cxx_filter(_strings(lib.read_bytes()), name))
    return out


def cxx_filter(strings, where: str) -> list[Message]:
    """The strings of a library that read as messages a log shows (not schemas, code, internal asserts)."""
    out, seen = [], set()
    for s in strings:
        s = s.strip()
        if not CXX_WORDS.search(s) or len(s.split()) < 4 or s in seen:
            continue
        if "INTERNAL ASSERT FAILED" in s or "__torch__" in s or re.search(
                r"(;|\{|(?<!\{)\})\s*$|^\s*(def|class|import|#include|template)\b|::\w+\(|\w+\(\w+\s\w+,", s):
            continue  # schemas, code, signatures: not text a log shows
        seen.add(s)
        out.append(Message("cxx", where, "string", _PRINTF.sub(FIELD, s)))
    return out


# typical values a run puts in a field; the first is used for coverage, all for tests
FILLS = ("1", "cuda:0", "localhost:29500")


def fill(template: str, value: str = FILLS[0]) -> str:
    return template.replace(FIELD, value)


def line_of(m: Message, value: str = FILLS[0]) -> str:
    """The message as a log shows it: exceptions with their type in front."""
    text = fill(m.template, value)
    if m.source == "py" and m.kind not in ("warn",) and not m.kind.startswith("logger."):
        return f"{m.kind}: {text}"
    return text


def coverage(messages: list[Message], references: str | None = None) -> list[dict]:
    from distdoctor.diagnose import diagnose_text
    from distdoctor.diagnose.matcher import matcher_for

    matcher = matcher_for(references)
    rows = []
    for m in messages:
        # covered if some typical filling matches (a field may need a number, a device or an endpoint)
        line, hits = line_of(m), []
        for value in FILLS:
            hits = matcher.match_line(line_of(m, value))
            if hits:
                line = line_of(m, value)
                break
        row = {**asdict(m), "line": line, "signatures": sorted({f"{s.cause}#{s.index}" for s in hits})}
        if hits:
            r = diagnose_text(line, references_root=references)
            row["diagnosis"] = [c["id"] for c in r["causes"]][:3]
            row["verdict"] = r["verdict"]
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--torch-root", help="the installed torch package folder (…/site-packages/torch)")
    src.add_argument("--messages", help="the JSON an earlier run printed (an inventory taken on another machine)")
    src.add_argument("--strings", help="a library's printable strings, one a line (taken where the library is)")
    ap.add_argument("--strings-name", default="strings", help="the library --strings came from (its rows' `where`)")
    ap.add_argument("--coverage", action="store_true", help="also match each message against the knowledge base")
    ap.add_argument("--uncovered", action="store_true", help="with --coverage: list only messages nothing matches")
    ap.add_argument("--references", help="the knowledge base to match against (default: this checkout's references/)")
    ap.add_argument("--no-cxx", action="store_true", help="Python messages only")
    ap.add_argument("--no-python", action="store_true", help="C++ messages only (needs no libcst)")
    args = ap.parse_args(argv)
    if args.strings:
        try:
            messages = cxx_filter(Path(args.strings).read_text(encoding="ascii", errors="replace").splitlines(),
                                  args.strings_name)
        except OSError as e:
            print(f"torch_messages: {args.strings}: {e.strerror}", file=sys.stderr)
            return 2
    elif args.messages:
        try:
            messages = [Message(**m) for m in json.loads(Path(args.messages).read_text())["messages"]]
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"torch_messages: {args.messages}: not an inventory this tool printed ({e})", file=sys.stderr)
            return 2
    else:
        root = Path(args.torch_root)
        if not (root / "distributed").is_dir():
            print(f"torch_messages: {root}: not a torch package folder (no distributed/)", file=sys.stderr)
            return 2
        messages = (([] if args.no_python else python_messages(root))
                    + ([] if args.no_cxx else cxx_messages(root)))
    if not args.coverage:
        json.dump({"messages": [asdict(m) for m in messages], "count": len(messages)}, sys.stdout, indent=1)
        print()
        return 0
    from distdoctor.knowledge import KnowledgeError

    try:
        rows = coverage(messages, args.references)
    except KnowledgeError as e:
        print(f"torch_messages: {e}", file=sys.stderr)
        return 2
    covered = [r for r in rows if r["signatures"]]
    summary = {"messages": len(rows), "covered": len(covered),
               "python": sum(r["source"] == "py" for r in rows), "cxx": sum(r["source"] == "cxx" for r in rows),
               "covered_python": sum(r["source"] == "py" for r in covered),
               "covered_cxx": sum(r["source"] == "cxx" for r in covered)}
    shown = [r for r in rows if not r["signatures"]] if args.uncovered else rows
    json.dump({"summary": summary, "rows": shown}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    from distdoctor.cli import quiet_on_broken_pipe

    sys.exit(quiet_on_broken_pipe(main))
