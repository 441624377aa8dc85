"""Structural evidence: what a failure is made of, beyond exact text.

An error line becomes (exception type, message template, tokens): numbers, hex, paths, hosts, ports and
sizes are abstracted, so "Connection closed by peer [10.0.0.3]:41234" and "[127.0.0.1]:5" read alike. A
traceback gives its torch frames (the torch functions it went through). A "Detected mismatch between
collectives" line says whether the ranks ran different operations or the same one with different sizes.
No cause knowledge lives here except the one reading of that mismatch (MISMATCH_*); a store wait's kind of
key comes from store_wait.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from distdoctor.diagnose import store_wait
from distdoctor.diagnose.events import EXC_LINE, FRAME, Event

_ABSTRACT = [
    (re.compile(r"https?://\S+"), " <url> "),
    (re.compile(r"(?:[A-Za-z]:)?[\w.~-]*(?:[\\/][\w.@+~-]+){2,}[\\/]?"), " <path> "),
    (re.compile(r"\[?\b(?:\d{1,3}\.){3}\d{1,3}\]?(?::\d+)?|\[[0-9a-f:]*:[0-9a-f:]*\](?::\d+)?"), " <addr> "),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), " <hex> "),
    (re.compile(r"\b\d+(?:\.\d+)?\s*(?:[KMGT]i?B|bytes|ms|s|sec|seconds|minutes)\b"), " <size> "),
    (re.compile(r"\d+"), " <n> "),
]
_TOKEN = re.compile(r"<\w+>|[A-Za-z_][A-Za-z0-9_]*")
_EXC_TYPE = re.compile(r"^\s*(?:[A-Za-z_][\w.]*\.)?(?P<name>[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|NotMet|Failure))"
                       r"\b(?::|\s*$)")
_TORCH_FRAME = re.compile(r'File "[^"]*[\\/](?:torch|deepspeed|accelerate|lightning|transformers)[\\/][^"]*", line \d+, '
                          r"in (?P<fn>[\w<>.]+)")
# Words that carry no meaning for matching failures (besides numbers, which are abstracted anyway).
STOP = frozenset("the a an of to in on for is was be by at or and with this that it as are not from "
                 "n path addr hex size url".split())

# "Detected mismatch between collectives": torch names each rank's fingerprint (produced here by torch 2.13
# with TORCH_DISTRIBUTED_DEBUG=DETAIL and gloo, see tests/test_diagnose_calibration.py).
MISMATCH = "Detected mismatch between collectives"
_FINGERPRINT = re.compile(r"Rank (?P<rank>\d+) is running collective: CollectiveFingerPrint\("
                          r"SequenceNumber=(?P<seq>\d+), OpType=(?P<op>\w+)(?:, TensorShape=\[(?P<shape>[^\]]*)\])?")
# Older releases print one fingerprint per line, each rank its own (https://github.com/xljh0520/JOTR/issues/4):
# "... on ranks. Rank 0 is running inconsistent collective: CollectiveFingerPrint(OpType=ALLGATHER, TensorShape=..."
_OWN_FINGERPRINT = re.compile(r"Rank (?P<rank>\d+) is running inconsistent collective: CollectiveFingerPrint\("
                              r"(?:SequenceNumber=\d+, )?OpType=(?P<op>\w+)")
MISMATCH_CAUSE = "rank_conditional_collective"  # different operations: some ranks skipped or reordered one
MISMATCH_SIZE_CAUSES = ("collective_shape_mismatch", "model_differs_across_ranks", "dataloader_uneven")  # same op, sizes differ (ids the KB has)


def template(text: str) -> str:
    """The message with numbers, hex, paths, addresses, ports and sizes abstracted."""
    for rx, repl in _ABSTRACT:
        text = rx.sub(repl, text)
    return " ".join(text.split())


def tokens(text: str) -> list[str]:
    """Lower-case word tokens of a template (stop words and placeholders dropped): for matching and retrieval."""
    return [t for t in (m.lower() for m in _TOKEN.findall(template(text))) if len(t) > 1 and t.strip("<>") not in STOP]


# Error lines that are not Python exceptions still have a kind: a glog/c10 line names its level and C++ source
# file ([E1123 07:09:50.991 ProcessGroupNCCL.cpp:616], [W427 ... socket.cpp:752]), NCCL its warnings.
_GLOG = re.compile(r"^\[?(?P<level>[EFW])\d{3,4} [\d:.]+(?: +\d+)? +(?:[\w./-]*/)?(?P<file>[\w.-]+\.(?:cpp|cc|h|hpp|py)):\d+\]")
_NCCL_WARN = re.compile(r"\bNCCL WARN\b")


def exception_type(body: str) -> str | None:
    """The failure's kind: a Python exception's class name, `E:<file.cpp>` for a glog/c10 error or warning
    line, `NCCL WARN`; None for other lines."""
    m = _EXC_TYPE.match(body)
    if m:
        return m["name"]
    m = _GLOG.match(body)
    if m:
        return f"{m['level']}:{m['file']}"
    return "NCCL WARN" if _NCCL_WARN.search(body) else None


@dataclass(frozen=True)
class Failure:
    """What one error event is made of."""

    exc_type: str | None
    message: str            # the key line without its rank prefix
    words: frozenset[str]   # template tokens of the message
    frames: tuple[str, ...]  # torch (and framework) functions of its traceback, outermost first
    says: bool = True        # the message says something beyond the exception's (qualified) name
    store: str | None = None  # a store wait's kind of key (store_wait.key_kind): what the wait was for


def _failure(body: str, frames: tuple[str, ...]) -> Failure:
    """A failure's words are its message template's tokens and the torch functions it failed in."""
    m = _EXC_TYPE.match(body)
    # a wrapper with an empty message (`ProcessRaisedException:`, `ChildFailedError:`) names no failure
    says = m is None or bool(tokens(body[m.end():]))
    return Failure(exception_type(body), body, frozenset(tokens(body)) | {f"frame:{f}" for f in frames}, frames,
                   says, store_wait.key_kind(body))


def failure_of(ev: Event) -> Failure:
    key = ev.key_line()
    frames = tuple(m["fn"] for ln in ev.lines for m in [_TORCH_FRAME.search(ln.body)] if m)
    return _failure(key.body.strip(), frames)


def failure_of_text(line: str, frames: tuple[str, ...] = ()) -> Failure:
    return _failure(line.strip(), frames)


def error_lines(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """The exception lines of a text held in memory (a quote, a corpus log), without rank prefixes, each with
    the torch frames of the traceback it ends."""
    from distdoctor.diagnose.events import TRACEBACK
    from distdoctor.diagnose.prefixes import split_prefix

    out = []
    frames: list[str] = []
    for line in text.splitlines():
        body = split_prefix(line)[2].strip()
        if TRACEBACK.search(body):
            frames = []
            continue
        m = _TORCH_FRAME.search(body)
        if m:
            frames.append(m["fn"])
            continue
        if (EXC_LINE.match(body) or exception_type(body)) and not FRAME.match(body) and len(tokens(body)) >= 3:
            out.append((body, tuple(frames)))
            frames = []
    return out


# NCCL's failures share one wrapper ("NCCL error in: <file>:<line>, <result> (run with NCCL_DEBUG=INFO for details)",
# "NCCL Error 2: <result>", or the result's code name, ncclSystemError); only the result says which failure it was. Its kinds, as the wrappers
# of the corpus's logs spell them (older releases: "unhanled system error").
_NCCL_RESULT = re.compile(r"NCCL [Ee]rror(?: in: ?\S+?[,，]| \d+:) ?(?P<res>[a-z][a-z ]+?)(?: \(|,|\.|$)"
                          r"|\bnccl(?P<code>UnhandledCudaError|SystemError|InternalError|InvalidArgument|InvalidUsage|"
                          r"RemoteError)\b")
_NCCL_KINDS = ("cuda", "system", "internal", "argument", "usage", "remote")


def nccl_result(text: str) -> str | None:
    """The kind of NCCL result a wrapper line names (`cuda`, `system`, `usage`, ...), or None."""
    m = _NCCL_RESULT.search(text)
    if m is None:
        return None
    words = (m["res"] or m["code"]).lower()
    return next((k for k in _NCCL_KINDS if k in words), None)


def similarity(a: Failure, b: Failure) -> float:
    """How alike two failures are: 0 unless their exception types agree and both messages say something; then
    the overlap of their templates."""
    if a.exc_type is None or a.exc_type != b.exc_type or not a.words or not b.words or not (a.says and b.says):
        return 0.0
    if (a.store or b.store) and (a.store != b.store or a.store == "own"):
        return 0.0  # store waits are alike only when they waited for the same kind of key (never the program's own)
    ra, rb = nccl_result(a.message), nccl_result(b.message)
    if ra and rb and ra != rb:
        return 0.0  # NCCL's wrapper with another result: "unhandled cuda error" is not "unhandled system error"
    return len(a.words & b.words) / len(a.words | b.words)


@dataclass(frozen=True)
class Mismatch:
    same_op: bool
    ranks: tuple[int, int]
    ops: tuple[str, str]
    shapes: tuple[str, str]

    def proves(self) -> str:
        (r0, r1), (o0, o1), (s0, s1) = self.ranks, self.ops, self.shapes
        if self.same_op:
            sizes = f"different sizes ([{s0}] vs [{s1}])" if s0 or s1 else "different tensors"
            return (f"ranks {r0} and {r1} both ran {o0}, with {sizes}: the ranks' "
                    "tensors differ (model or data), not a collective skipped by some ranks")
        return f"rank {r0} ran {o0} while rank {r1} ran {o1}: the ranks called different collectives"


def collective_mismatch(text: str) -> Mismatch | None:
    """The two fingerprints of a "Detected mismatch between collectives" line, or None."""
    if MISMATCH not in text:
        return None
    fps = list(_FINGERPRINT.finditer(text))
    if len(fps) < 2:
        # cut before the fingerprints: only torch's summary of aspects may be left
        if "Op type:" in text:
            return Mismatch(False, (0, 0), ("?", "?"), ("", ""))
        return None
    a, b = fps[0], fps[1]
    return Mismatch(a["op"] == b["op"], (int(a["rank"]), int(b["rank"])), (a["op"], b["op"]),
                    (a["shape"] or "", b["shape"] or ""))


def own_fingerprint(text: str) -> tuple[int, str] | None:
    """(rank, operation) of an older release's one-rank "running inconsistent collective" report, or None."""
    m = _OWN_FINGERPRINT.search(text) if MISMATCH in text else None
    return None if m is None or "but Rank" in text else (int(m["rank"]), m["op"])


def same_op_reports(ops: dict[int, str]) -> Mismatch | None:
    """Two or more ranks' own reports of one mismatch, all naming the same operation: the ranks ran the same
    collective with different tensors."""
    if len(ops) < 2 or len(set(ops.values())) != 1:
        return None
    (r0, op), (r1, _) = sorted(ops.items())[:2]
    return Mismatch(True, (r0, r1), (op, op), ("", ""))
