"""CUDA's p2pBandwidthLatencyTest output, read as structure: is peer-to-peer copying slower than no P2P at all?

The sample prints the GPU-to-GPU bandwidth twice, with P2P disabled (copies staged through host memory) and
enabled. On a healthy machine P2P is at least as fast; where it is several times slower (a PCIe switch or IOMMU
that breaks peer traffic, ACS on), NCCL's P2P transport stalls or hangs the job: structural evidence of
`nccl_p2p_broken` from the matrices a thread pastes, whatever the numbers. Read from the input's first bytes
(the sample's output is short and usually pasted alone).
"""

from __future__ import annotations

import re

CAUSE = "nccl_p2p_broken"
WEIGHT = 4.0
SLOWER = 0.5  # P2P below half the staged copy's bandwidth counts as broken
_HEADER = re.compile(r"^(?P<dir>Unidirectional|Bidirectional) P2P=(?P<p2p>Enabled|Disabled) Bandwidth.*Matrix \(GB/s\)")
_ROW = re.compile(r"^\s*(?P<gpu>\d{1,2})((?:\s+\d+(?:\.\d+)?)+)\s*$")


def _matrices(text: str) -> dict[tuple[str, str], tuple[dict[tuple[int, int], float], str]]:
    """(direction, Enabled/Disabled) -> ({(from, to): GB/s}, the header line) for each matrix."""
    out: dict = {}
    current = None
    for line in text.splitlines():
        h = _HEADER.match(line.strip())
        if h:
            current = (h["dir"], h["p2p"])
            out[current] = ({}, line.strip())
            continue
        if current is None or "D\\D" in line:
            continue
        m = _ROW.match(line)
        if not m:
            current = None
            continue
        src = int(m["gpu"])
        for dst, value in enumerate(m.group(2).split()):
            out[current][0][(src, dst)] = float(value)
    return out


def broken_p2p(text: str) -> tuple[str, str] | None:
    """(what it shows, the enabled matrix's header line) when P2P is much slower than staged copies, else None."""
    found = _matrices(text)
    for direction in ("Unidirectional", "Bidirectional"):
        on, off = found.get((direction, "Enabled")), found.get((direction, "Disabled"))
        if not on or not off:
            continue
        slow = [(pair, v, off[0][pair]) for pair, v in sorted(on[0].items())
                if pair[0] != pair[1] and pair in off[0] and v < SLOWER * off[0][pair]]
        if slow:
            (a, b), v, w = slow[0]
            return (f"{direction.lower()} bandwidth GPU {a} -> {b} is {v:g} GB/s with P2P enabled and {w:g} GB/s "
                    f"with it disabled ({len(slow)} GPU pairs slower with P2P): peer-to-peer traffic is broken", on[1])
    return None
