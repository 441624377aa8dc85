"""nvidia-smi's process table, read as structure: which process holds memory on which GPU.

Each rank of a healthy job holds one GPU. A process listed on several GPUs, or several processes of the job
on one GPU beside one big one, means ranks allocated on a GPU not their own: most often every rank's
`torch.load` without `map_location` restoring tensors onto the GPU that saved them (cuda:0), or tensors
created on a fixed device. That is structural evidence of `torch_load_no_map_location` (and, weaker, of
`local_rank_device`), read from the table a thread pastes, whatever the numbers.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

ANCHORS = ("MiB |",)
CAUSES = (("torch_load_no_map_location", 4.0), ("local_rank_device", 2.0))
# |    0     62250      C   /usr/bin/python3.6                          4903MiB |   (older nvidia-smi)
# |    0   N/A  N/A     62250      C   python                              4903MiB |   (with GI/CI ids)
# |    0   N/A  N/A   2695173      C   [xarexec] ./dlrm_hack2.par        871MiB |   (a name with a space;
#      pasted, a row may lose its leading bar)
_ROW = re.compile(r"(?:\|\s+|^\s*)(?P<gpu>\d{1,2})\s+(?:N/A\s+N/A\s+|\d+\s+\d+\s+)?(?P<pid>\d{2,8})\s+C(?:\+G)?\s+"
                  r"(?P<name>\S(?:.*?\S)?)\s+(?P<mib>\d+)\s?MiB\s*\|")
SAME_NAME = 3  # rows of one program that make it the job's own, whatever its name
MAX_ROWS = 256


@dataclass
class GpuProcesses:
    rows: list[tuple[int, int, int, dict]] = field(default_factory=list)   # gpu, pid, MiB, the line
    names: list[str] = field(default_factory=list)                        # each row's process name

    def read(self, text: str, where: dict) -> None:
        if "MiB" not in text or len(self.rows) >= MAX_ROWS:
            return
        m = _ROW.search(text)
        if m:
            self.rows.append((int(m["gpu"]), int(m["pid"]), int(m["mib"]), {**where, "text": text[:500]}))
            self.names.append(m["name"])

    def job_rows(self) -> list[tuple[int, int, int, dict]]:
        """The rows of the job's processes: a Python interpreter, or a program (a packaged trainer, a
        launcher-renamed binary) listed at least SAME_NAME times; a desktop's or another tool's lone row is not."""
        count = Counter(self.names)
        return [row for row, name in zip(self.rows, self.names)
                if "python" in name.lower() or count[name] >= SAME_NAME]

    def foreign(self) -> tuple[str, list[dict]] | None:
        """(what it shows, the rows that show it) when a process holds several GPUs or a GPU holds
        several small processes besides its own; else None."""
        gpus_of: dict[int, set[int]] = defaultdict(set)
        pids_on: dict[int, list[tuple[int, int, dict]]] = defaultdict(list)
        rows = self.job_rows()
        for gpu, pid, mib, line in rows:
            gpus_of[pid].add(gpu)
            pids_on[gpu].append((pid, mib, line))
        for pid, gpus in gpus_of.items():
            if len(gpus) >= 2:
                lines = [ln for g, p, _, ln in rows if p == pid]
                return (f"process {pid} holds memory on GPUs {', '.join(map(str, sorted(gpus)))}: a rank allocated "
                        f"on a GPU not its own", lines)
        for gpu, procs in pids_on.items():
            if len(procs) >= 3:
                big = max(mib for _, mib, _ in procs)
                small = [ln for _, mib, ln in procs if mib < big]
                if len(small) >= 2:
                    return (f"{len(procs)} processes hold memory on GPU {gpu}: the other ranks created "
                            f"contexts or tensors on it", [ln for _, _, ln in procs])
        return None
