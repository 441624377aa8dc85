"""Read PyTorch Flight Recorder traces (the pickle `torch._C._distributed_c10d._dump_fr_trace()` returns and
NCCL's TORCH_NCCL_DUMP_ON_TIMEOUT writes, see torch/distributed/flight_recorder/) and find the first
collective where the ranks disagree: operation, sizes, dtypes, or a rank that never got there.

torch's own analyzer (`python -m torch.distributed.flight_recorder.fr_trace DIR`) raises KeyError on gloo
dumps; this reader needs only the entries. Files are unpickled with no class allowed (the format is plain
dicts, lists, tuples, strings and numbers), so a crafted file cannot run code.
"""

from __future__ import annotations

import io
import json
import pickle
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from distdoctor.hang.frames import is_library

TRAILING_RANK = re.compile(r"(\d+)$")


class TraceError(ValueError):
    """A file that is no Flight Recorder trace; the message names it."""


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):  # noqa: D102 - plain data only
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}: a trace holds plain data only")


def read_trace(path: Path) -> dict:
    """The trace dict of one file (pickle, or JSON as TORCH_NCCL_USE_JSON writes)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TraceError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        trace = _PlainUnpickler(io.BytesIO(data)).load()
    except Exception:  # noqa: BLE001 - any unpickling failure: try JSON, then report
        try:
            trace = json.loads(data)
        except ValueError:
            raise TraceError(f"{path}: not a Flight Recorder trace (neither its pickle nor JSON)") from None
    if not isinstance(trace, dict) or not isinstance(trace.get("entries", []), list):
        raise TraceError(f"{path}: not a Flight Recorder trace (no `entries` list)")
    return trace


def _user_frame(frames: list[dict]) -> dict | None:
    for f in frames or []:
        if not is_library(str(f.get("filename", ""))):
            return {"file": f.get("filename"), "line": f.get("line"), "function": f.get("name")}
    return None


def compact(trace: dict) -> list[dict]:
    """The entries as small JSON-able dicts: seq, pg, op, sizes, dtypes, state, p2p, the user's frame."""
    out = []
    for e in trace.get("entries", []):
        pg = e.get("process_group")
        name = pg[0] if isinstance(pg, (list, tuple)) and pg else str(e.get("pg_id", "0"))
        out.append({"seq": e.get("collective_seq_id"), "p2p_seq": e.get("p2p_seq_id"), "pg": str(name),
                    "op": str(e.get("profiling_name", "?")).split(":", 1)[-1], "p2p": bool(e.get("is_p2p")),
                    "input_sizes": e.get("input_sizes"), "input_dtypes": e.get("input_dtypes"),
                    "output_sizes": e.get("output_sizes"), "state": e.get("state"),
                    "frame": _user_frame(e.get("frames"))})
    return out


def read_dir(folder: Path, prefix: str | None = None) -> dict[str, list[dict]]:
    """{rank: compact entries} for every file in folder whose name ends in the rank (optionally with prefix)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise TraceError(f"{folder}: not a folder of Flight Recorder traces")
    out = {}
    for path in sorted(folder.iterdir()):
        m = TRAILING_RANK.search(path.name)
        if not path.is_file() or not m or (prefix and not path.name.startswith(prefix)):
            continue
        out[m.group(1)] = compact(read_trace(path))
    if not out:
        raise TraceError(f"{folder}: no trace file named <prefix><rank> in it")
    return out


@dataclass
class Divergence:
    pg: str
    seq: int
    by_rank: dict[int, dict | None]  # rank -> its entry at seq (None: never got there)
    odd_ranks: list[int]
    what: str  # op | sizes | dtypes | missing
    frame: dict | None = None  # the user's frame of the odd ranks' entry
    evidence: list[str] = field(default_factory=list)


def _signature(e: dict | None) -> tuple | None:
    if e is None:
        return None
    return e["op"], json.dumps(e.get("input_sizes")), json.dumps(e.get("input_dtypes"))


def _describe(e: dict | None) -> str:
    if e is None:
        return "never got there"
    return f"{e['op']} sizes {e.get('input_sizes')} dtypes {e.get('input_dtypes')} ({e.get('state')})"


def first_divergence(traces: dict[str, list[dict]]) -> Divergence | None:
    """The first collective sequence number, per process group, where the ranks' entries differ."""
    per_pg: dict[str, dict[int, dict[int, dict]]] = defaultdict(lambda: defaultdict(dict))
    for rank, entries in traces.items():
        for e in entries:
            if not e.get("p2p") and isinstance(e.get("seq"), int):
                per_pg[e["pg"]][int(rank)][e["seq"]] = e
    found = []
    for pg, ranks in per_pg.items():
        if len(ranks) < 2:
            continue
        low = max(min(seqs) for seqs in ranks.values())  # older entries may have left a full ring buffer
        high = max(max(seqs) for seqs in ranks.values())
        for seq in range(low, high + 1):
            by_rank = {r: ranks[r].get(seq) for r in sorted(ranks)}
            groups: dict[tuple | None, list[int]] = defaultdict(list)
            for r, e in by_rank.items():
                groups[_signature(e)].append(r)
            if len(groups) < 2:
                continue
            # the odd ranks: the smallest group; on a tie, ranks that never got there, else the later ranks
            odd_sig = min(groups, key=lambda s: (len(groups[s]), s is not None, -min(groups[s])))
            odd = groups[odd_sig]
            others = [e for r, e in by_rank.items() if r not in odd and e is not None]
            odd_e = next((by_rank[r] for r in odd if by_rank[r] is not None), None)
            if odd_sig is None or any(e is None for e in by_rank.values()):
                what = "missing"
            elif others and odd_e["op"] != others[0]["op"]:
                what = "op"
            elif others and odd_e.get("input_sizes") != others[0].get("input_sizes"):
                what = "sizes"
            else:
                what = "dtypes"
            evidence = [f"process group {pg!r}, collective #{seq}: rank {r}: {_describe(e)}"
                        for r, e in by_rank.items()]
            frame = (odd_e or (others[0] if others else None) or {}).get("frame")
            found.append(Divergence(pg, seq, by_rank, odd, what, frame, evidence))
            break
    return min(found, key=lambda d: (d.seq, d.pg)) if found else None
