"""Version facts a log states in passing, compared: the CUDA version the driver supports against the one
the build was made for.

NCCL's INFO lines say both ("cudaDriverVersion 11000", "NCCL version 2.14.3+cuda11.7"), nvidia-smi's
banner says what the driver supports ("CUDA Version: 11.0"), a pip or torch version string says what torch
was built for ("2.0.1+cu118"). A driver below the build is structural evidence of `cuda_driver_too_old`
even when no error line names it (NCCL then fails later with an unrelated-looking message).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

CAUSE = "cuda_driver_too_old"
ANCHORS = ("cudaDriverVersion", "CUDA Version", "+cuda", "+cu1", "+cu9")

_DRIVER = [
    re.compile(r"\bcudaDriverVersion (?P<n>\d{4,6})\b"),                       # NCCL INFO: 11000 = 11.0
    re.compile(r"\bCUDA Version: (?P<major>\d{1,2})\.(?P<minor>\d)\b"),        # nvidia-smi's banner
]
_BUILD = [
    re.compile(r"\bNCCL version [\d.]+\+cuda(?P<major>\d{1,2})\.(?P<minor>\d)\b"),
    re.compile(r"\b(?:torch|pytorch)[ =:_-]*(?:version[ =:]*)?\d+\.\d+(?:\.\d+)?\+cu(?P<packed>\d{2,3})\b", re.I),
]


@dataclass
class VersionFacts:
    driver: tuple[tuple[int, int], dict] | None = None   # lowest CUDA version a driver supports, and its line
    build: tuple[tuple[int, int], dict] | None = None    # highest CUDA version a build needs, and its line
    lines: list[dict] = field(default_factory=list)

    def read(self, text: str, where: dict) -> None:
        """Note the versions one line states (`where`: file, line, rank of the line)."""
        if not any(a in text for a in ANCHORS):
            return
        for rx in _DRIVER:
            m = rx.search(text)
            if m:
                v = _from_packed(int(m["n"])) if "n" in rx.groupindex else (int(m["major"]), int(m["minor"]))
                if self.driver is None or v < self.driver[0]:
                    self.driver = (v, {**where, "text": text[:500]})
        for rx in _BUILD:
            m = rx.search(text)
            if m:
                if "packed" in rx.groupindex:
                    p = m["packed"]
                    v = (int(p[:-1]), int(p[-1]))
                else:
                    v = (int(m["major"]), int(m["minor"]))
                if self.build is None or v > self.build[0]:
                    self.build = (v, {**where, "text": text[:500]})

    def too_old(self) -> list[dict]:
        """Evidence lines when the driver supports an older CUDA than the build needs, else []."""
        if self.driver is None or self.build is None or self.driver[0] >= self.build[0]:
            return []
        (dv, dline), (bv, bline) = self.driver, self.build
        proves = (f"the driver supports CUDA {dv[0]}.{dv[1]} but the build needs CUDA {bv[0]}.{bv[1]}: "
                  f"the driver is older than the build's CUDA runtime")
        out = [{**dline, "kind": "structural", "proves": proves}]
        if (bline["file"], bline["line"]) != (dline["file"], dline["line"]):
            out.append({**bline, "kind": "structural", "proves": proves})
        return out


def _from_packed(n: int) -> tuple[int, int]:
    """CUDA's packed version number: 11000 -> (11, 0), 10010 -> (10, 1), 9020 -> (9, 2)."""
    return n // 1000, (n % 1000) // 10
