"""Local ranks to global ones. torchrun numbers each node's workers 0 .. nproc-1: its --tee prefix
([default1]:), its --log-dir folders (<run>/attempt_0/<local rank>/stderr.log) and its "local_rank: N" lines
name a local rank; the global rank is the node's first rank plus that. The logs state pairs (torchrun's summary
"rank : 3 (local_rank: 1)", a worker's own "[rank3]:" lines in its folder) that give a node's offset; where
nothing gives it and the logs show more than one node, a local rank names no global one."""

from __future__ import annotations

from typing import Hashable

Node = Hashable  # a per-rank folder of one agent (its attempt folder), or (source, srun task) for a console


class LocalRanks:
    """Pairs (node, local rank) -> global rank as the logs state them, and the translation of the rest."""

    def __init__(self) -> None:
        self.pairs: dict[tuple[Node, int], int] = {}
        self.folders: dict[int, str] = {}          # source -> its torchrun --log-dir attempt folder
        self.tasks: dict[int, set[int]] = {}       # source -> srun task labels seen in it
        self.locals: dict[str, set[int]] = {}      # --log-dir attempt folder -> the local ranks of its files

    def node(self, src: int, task: int | None) -> Node:
        """The node a line of `src` comes from: its --log-dir folder, else the console (and srun task)."""
        folder = self.folders.get(src)
        return folder if folder is not None else ("console", src, task)

    def pair(self, node: Node, local: int, rank: int) -> None:
        self.pairs.setdefault((node, local), rank)

    def _offsets(self, node: Node) -> set[int]:
        return {g - lo for (n, lo), g in self.pairs.items() if n == node}

    def folder(self, src: int, folder: str, local: int) -> None:
        """`src` is local rank `local`'s file in a torchrun --log-dir attempt folder."""
        self.folders[src] = folder
        self.locals.setdefault(folder, set()).add(local)

    def task(self, src: int, task: int) -> None:
        self.tasks.setdefault(src, set()).add(task)

    def global_rank(self, node: Node, local: int, world: int | None = None) -> int | None:
        """The global rank of local rank `local` on `node`, or None where the logs cannot tell. `world`: the
        job's size where a line states it (more ranks than one folder's files: that folder is one node of several)."""
        if (node, local) in self.pairs:
            return self.pairs[(node, local)]
        offsets = self._offsets(node)
        if offsets:
            return local + offsets.pop() if len(offsets) == 1 else None
        if isinstance(node, str):  # a --log-dir folder with no pair stated in it
            if len(self.locals) > 1:
                return None  # several nodes' folders: the same local numbers on each
            # the console's summary, where every pair it states agrees (one agent wrote them)
            offsets = {g - lo for (n, lo), g in self.pairs.items() if not isinstance(n, str)}
            if len(offsets) == 1:
                return local + offsets.pop()
            if offsets or (world or 0) > len(self.locals[node]):
                return None  # the job has more ranks than this folder: one node of several
        elif node[2] is not None and len(self.tasks.get(node[1], ())) > 1:
            return None  # srun tasks that each run an agent: each task numbers its workers from 0
        return local  # one node: the local rank is the global one
