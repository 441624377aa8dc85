"""Log syntax: ANSI colours, rank prefixes, timestamps, and rank hints in file names.

Only structure lives here (how launchers and loggers decorate a line); no cause knowledge.
"""

from __future__ import annotations

import re

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")

# Each pattern matches at the start of the remaining text; group "rank" is the rank it names,
# group "ts" (optional) a timestamp carried by the prefix itself. Tried in a loop, so nested
# prefixes ("0: [rank0]:[E1123 ...]") are peeled one after the other.
_PREFIXES: list[tuple[str, re.Pattern[str]]] = [
    # torch's per-rank prefix: [rank3]: (quoted in a thread, the colon is sometimes lost: "[rank8] Warning")
    ("rank", re.compile(r"\[rank(?P<rank>\d+)\](?::|\s)")),
    # Lightning's rank prefix: [rank: 1] ...; torch's print op: [rank 1] ...; Determined's wrap_rank: [rank=1] ...
    ("rank", re.compile(r"\[rank(?:: ?| |=)(?P<rank>\d+)\]:?\s?")),
    # a host name in front of a per-rank prefix (pdsh / DeepSpeed's multi-node launcher): "worker-1: [rank3]: ..."
    ("none", re.compile(r"(?![\w.]*(?:Error|Exception|Warning|Exit|Interrupt):)(?:[A-Za-z][\w.-]*|\d{1,3}(?:\.\d{1,3}){3}): (?=\[(?:rank\d+|rank: ?\d+|[A-Za-z_]+\d+)\]:?)")),
    # markdown quote or heading marks pasted in front of torch's prefix: "> #[rank0]:[W403 ...]"
    ("none", re.compile(r"[>#][>#\s]*(?=\[rank\d+\])")),
    # distdoctor.tracer: [07:40:06.417][+0.009s][R1/2][LR0][PID:30423]
    ("rank", re.compile(r"\[\d\d:\d\d:\d\d\.\d+\]\[\+[\d.]+s\]\[R(?P<rank>\d+)/\d+\]\[LR\d+\]\[PID:\d+\]\s?")),
    # olmo-core / composer style: [R0/2][LR0]
    ("rank", re.compile(r"\[R(?P<rank>\d+)/\d+\](?:\[LR\d+\])?:?\s?")),
    # horovodrun's worker prefix, with its optional ctime stamp: Thu Aug 29 16:41:02 2019[3]<stderr>: / [3]<stdout>:
    ("rank", re.compile(r"(?P<ts>[A-Z][a-z]{2} [A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d \d{4})?\[(?P<rank>\d+)\]<std(?:out|err)>:")),
    # mpirun --tag-output without time: [1,3]<stderr>:; SageMaker's MPI launcher: [1,mpirank:3,algo-1]<stderr>:
    ("rank", re.compile(r"\[\d+,(?:mpirank:)?(?P<rank>\d+)(?:,[\w.-]+)?\]<std(?:out|err)>:")),
    # Ray's worker prefix: (CommandActor pid=552, ip=10.130.6.168) or (pid=552) (names a process, not a rank);
    # SkyPilot's: (head, rank=0, pid=3808), (worker1, rank=1, pid=2769, ip=10.100.10.12) (a node's rank)
    ("none", _RAY := re.compile(r"\((?:[A-Za-z_][\w.:-]*(?:, rank=\d+)?,? )?pid=\d+(?:, ip=[\w.:-]+)?\)\s?")),
    # NCCL debug lines: host:pid:tid [device] NCCL ... (a device index, not a rank: peeled only)
    # (the host may start with a digit, as a container id does: 603760c1c291:16956:18844 [7])
    ("none", re.compile(r"(?=[\w.-]*[A-Za-z])[\w.-]+:\d+:\d+ \[(?P<rank>\d+)\] ")),
    # olmo-core style: 2025-06-16 16:58:45.173<TAB>g3053:1<TAB>...
    ("rank", re.compile(r"(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)\s+[A-Za-z][\w.-]*:(?P<rank>\d{1,5})\s")),
    # a logger's (or kubectl --timestamps') time in front of a rank prefix: 2024-11-20 14:37:16 [rank3]: /
    # 2026-08-03T09:47:01Z [1,0]<stderr>: / 18:11:06.680 [rank4]: (peeled, time kept)
    ("time", re.compile(r"\[?(?P<ts>\d{4}-\d\d-\d\d[ T_]\d\d:\d\d:\d\d(?:[.,]\d+)?|\d\d:\d\d:\d\d[.,]\d+)Z?\]?\s+"
                        r"(?=\[rank\d+\]:|\[\d+,\d+\]<std)")),
    # a log collector's time in front of the line itself (kubectl logs --timestamps, cloud logging, CI runners):
    # 2024-05-01T12:00:00.123456789Z   File "...": one separator peeled, the line's own indentation kept
    ("time", _COLLECTOR_TIME := re.compile(r"\[?(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)(?:Z|[+-]\d\d:?\d\d)?\]?[ \t]")),
    # a clock without a date in front of the line: a logger's or a wrapper's [06:40:01] (in brackets: a bare
    # "07:09:50 step" may be the line's own text), and moreutils `ts` ("Nov 27 06:40:01", "%b %d %H:%M:%.S")
    ("time", _CLOCK := re.compile(r"(?P<ts>\[\d\d:\d\d:\d\d(?:[.,]\d+)?\]|"
                                 r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:[.,]\d+)?)[ \t]")),
    # kubectl logs --prefix: [pod/trainer-worker-0/pytorch]; docker compose: "trainer-1  | " (names a
    # container, not a rank: peeled only); a runner naming the process and its stream in front of each line
    # (milabench: "diffusion-nodes.cn-n001.server.nolog [stderr] ")
    ("none", _CONTAINER := re.compile(r"\[pod/[\w.-]+/[\w.-]+\] |[A-Za-z][\w.-]*[-_]\d+ +\| |"
                                      r"(?:[A-Za-z][\w.-]* )?\[std(?:out|err)\] ")),
    # grep -r / grep -H (and -n) over log files: "logs/rank_1.log:..." / "out/12_1.out:37:..." (the rank, when the
    # file's name states one: rank_from_path)
    ("path", _GREP_PATH := re.compile(r"(?P<path>(?:[\w.-]+/)*[\w.-]+\.(?:log|txt|out|err)):(?:\d+:)?(?=\S|\s+\S)")),
    # torchrun with TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE="[${rank}]:": [3]: (the global rank). Not the bare
    # "[1]:" index lines of torchrun's failure table, which end there.
    ("rank", re.compile(r"\[(?P<rank>\d{1,5})\]:(?=.)")),
    # torchrun --tee / --role prefixes: [default0]:, [trainer3]:
    ("local", re.compile(r"\[(?!rank\d)[A-Za-z_][A-Za-z_-]*?(?P<rank>\d+)\]:")),
    # srun --label: "3: " (the task id: the rank where srun starts the workers, a node under srun torchrun)
    ("task", re.compile(r"(?P<rank>\d{1,5}): ")),
    # host:rank as in "g3053:2 " or "node-1:0: ". Not a source file's name and line: Python's warnings print
    # "train.py:45: UserWarning: ..." (a relative path), C++ "utils.cpp:12 ..." (no host is named like a file)
    ("rank", re.compile(r"(?![\w.-]*\.(?:py|pyx|pyi|c|cc|cpp|cxx|h|hpp|cu|cuh):\d)"
                        r"[A-Za-z][\w.-]*[A-Za-z0-9]:(?P<rank>\d{1,5})(?::\s?|\s)(?!\d)")),
]

_FIRST_ONLY = {_PREFIXES[-1][1], _PREFIXES[-2][1]}  # srun and host:rank labels lead the line
_COLLECTORS = {_COLLECTOR_TIME, _CLOCK, _CONTAINER, _RAY, _GREP_PATH}  # put in front of the whole line by whatever ran or kept the process

_TIMESTAMPS: list[tuple[str, re.Pattern[str]]] = [
    # glog: E1123 07:09:50.991000 or [E1123 07:12:03.210760729 ...]
    ("glog", re.compile(r"^\[?[IWEF](?P<mo>\d{1,2})(?P<d>\d\d) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:\.(?P<f>\d+))?")),
    # ISO-like: 2021-09-13 22:17:26,651 / 2026-11-23_07:09:50 / 2024-01-01T12:00:00.5
    ("iso", re.compile(r"(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)[ T_](?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:[.,](?P<f>\d+))?")),
    # 03/17/23 20:03:12
    ("mdy", re.compile(r"(?P<mo>\d\d)/(?P<d>\d\d)/(?P<y>\d\d) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)")),
    # ctime: Thu Aug 29 16:41:02 2019
    ("ctime", re.compile(r"[A-Z][a-z]{2} (?P<mon>[A-Z][a-z]{2}) +(?P<d>\d{1,2}) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d) (?P<y>\d{4})")),
    # a clock alone (a collector's [06:40:01] / 06:40:01.123) and moreutils ts's "Nov 27 06:40:01[.123456]": the
    # day is unknown (0), the order within one log holds
    ("clock", re.compile(r"\[?(?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:[.,](?P<f>\d+))?\]?$")),
    ("syslog", re.compile(r"(?P<mon>[A-Z][a-z]{2}) +(?P<d>\d{1,2}) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:[.,](?P<f>\d+))?$")),
    # vllm-style: 07-13 10:41:52
    ("md", re.compile(r"(?<![\d-])(?P<mo>\d\d)-(?P<d>\d\d) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)")),
]
_MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}

# Rank hints in a path: rank_3.log, rank-3.txt, rank3.err, torchrun --log-dir attempt_0/3/stderr.log
_PATH_RANK = [
    re.compile(r"attempt_\d+/(?P<rank>\d+)/(?:stdout|stderr|error)\.(?:log|json)$"),
    re.compile(r"(?:^|[^A-Za-z])rank[_-]?(?P<rank>\d+)(?:\D[^/]*)?$", re.I),
]


# torch names the reporting rank inside some messages of an unprefixed line: "... store based barrier on
# rank: 7, for key ...", "[Rank 0]: ...", "[PG ID 0 PG GUID 0(default_pg) Rank 3] ..." (only the default group's:
# "[PG ID 12 PG GUID 99(EXPERT_MODEL_PARALLEL_GROUP) Rank 4]" is a rank within that group), and the collective
# mismatch, which names the reporting rank first ("... on ranks. Rank 1 is running collective: ..., but Rank 0
# is running ...", ProcessGroupWrapper). Not "Rank 1 failed to pass": that names another rank.
_MESSAGE_RANK = re.compile(r"\b(?:on|for) rank:? (?P<a>\d+)\b|"
                           # [Rank 3] leading the message, after a glog header ("[E ProcessGroupNCCL.cpp:458] ",
                           # "E0704 13:48:58.260494 12 ProcessGroupNCCL.cpp:1746] "), C++'s "what():  " or the
                           # exception's name ("RuntimeError: [Rank 0]: Ranks 4, 5 failed to pass monitoredBarrier")
                           r"^\s*(?:\[?[EWIF]\d*(?: [\d:.]+)*(?: \d+)? [\w./-]+:\d+\] |.*?what\(\):\s+|[\w.]+(?:Error|Exception): )?"
                           r"\[Rank (?P<b>\d+)\]|"
                           r"\[PG ID 0 [^\]]*\bRank (?P<c>\d+)\]"
                           r"|collectives on ranks\. Rank (?P<d>\d+) is running collective")


def message_rank(body: str) -> int | None:
    """The rank a torch message says reported it, for a line without a rank prefix."""
    if "ank" not in body:
        return None
    m = _MESSAGE_RANK.search(body)
    return int(m["a"] or m["b"] or m["c"] or m["d"]) if m else None


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text) if "\x1b" in text else text


def common_indent(head: bytes, lines: int = 200) -> str:
    """The lead every non-blank line of a log's head shares, to take off each line: indentation (a log pasted
    indented: a 4-space markdown code block, a quote in a list) or markdown quote marks ("> ", "> > ": a log
    quoted in an issue or an e-mail reply; a line of quote marks alone counts as blank); "" when some line
    starts at the margin."""
    indent: bytes | None = None
    for raw in head.split(b"\n")[:lines]:
        raw = raw.rstrip(b"\r")
        lead = raw[:len(raw) - len(raw.lstrip(b" \t>"))]
        if len(lead) == len(raw):
            continue  # blank, or quote marks alone
        indent = lead if indent is None else indent[:next((i for i, (a, b) in enumerate(zip(indent, lead)) if a != b),
                                                          min(len(indent), len(lead)))]
        if not indent:
            return ""
    return (indent or b"").decode("ascii")


def split_prefix(line: str) -> tuple[int | None, tuple | None, str]:
    """Peel rank prefixes off a line: (rank or None, timestamp from a prefix or None, body)."""
    rank, local, ts, body, task = peel_prefix(line)
    return next((r for r in (rank, task, local) if r is not None), None), ts, body


def peel_prefix(line: str) -> tuple[int | None, int | None, tuple | None, str, int | None]:
    """Peel rank prefixes off a line: (global rank, local rank (torchrun's [default1]:), timestamp, body,
    srun --label's task id)."""
    rank: int | None = None
    local: int | None = None
    task: int | None = None
    ts = None
    body = line
    # a log pasted indented (a markdown list, a 4-space code block): a prefix behind the indentation still leads
    # the line (no prefix starts with white space); without one the indentation is the line's own (a frame)
    start = len(line) - len(line.lstrip())
    leading = True  # nothing but a log collector's prefix peeled so far: srun's label may still come
    for _ in range(5):
        for kind, rx in _PREFIXES:
            if not leading and rx in _FIRST_ONLY:
                continue
            m = rx.match(body, start)
            if m:
                value = int(m["rank"]) if "rank" in rx.groupindex else None
                if kind in ("none", "time"):
                    pass
                elif kind == "path":
                    named = _PATH_RANK[1].search(m["path"])
                    if rank is None and named:
                        rank = int(named["rank"])
                elif kind == "rank":
                    if rank is None or rx is _PREFIXES[0][1]:
                        rank = value
                elif kind == "task":
                    task = value
                elif local is None:
                    local = value
                if "ts" in rx.groupindex and m["ts"] and ts is None:
                    # the outermost time: a collector's, on every line alike, orders lines; a program's own
                    # time behind it is on some lines only
                    ts = parse_timestamp(m["ts"])
                body, start = body[m.end():], 0
                leading = leading and rx in _COLLECTORS
                break
        else:
            break
    return rank, local, ts, body, task


def parse_timestamp(text: str) -> tuple | None:
    """A sortable timestamp (year, month, day, h, m, s, fraction) from the start of a line body."""
    head = text[:80]
    for kind, rx in _TIMESTAMPS:
        m = rx.match(head) if kind in ("glog", "clock", "syslog") else rx.search(head)
        if not m:
            continue
        g = m.groupdict()
        year = int(g.get("y") or 0)
        if kind == "mdy":
            year += 2000
        month = _MONTHS.get(g["mon"], 0) if kind in ("ctime", "syslog") else int(g.get("mo") or 0)
        frac = float("0." + g["f"]) if g.get("f") else 0.0
        return (year, month, int(g.get("d") or 0), int(g["h"]), int(g["mi"]), int(g["s"]), frac)
    return None


def torch_rank(line: str) -> int | None:
    """The global rank of a line that starts with torch's own per-rank prefix ([rank3]:), else None."""
    m = _PREFIXES[0][1].match(line)
    return int(m["rank"]) if m else None


def torchrun_folder(path: str) -> str | None:
    """The attempt folder of a torchrun --log-dir file (<log dir>/<run id>/attempt_0/<local rank>/stderr.log):
    one agent's, so one node's; the number under it is a LOCAL rank (node_ranks). None for other paths."""
    m = _PATH_RANK[0].search(path.replace("\\", "/"))
    return path.replace("\\", "/")[:m.start()] + m[0].split("/")[0] if m else None


def rank_from_path(path: str) -> int | None:
    """The rank a per-rank log file's path names (a local one in a torchrun --log-dir folder), or None."""
    norm = path.replace("\\", "/")
    for rx in _PATH_RANK:
        m = rx.search(norm)
        if m:
            return int(m["rank"])
    return None


# NCCL debug lines start "host:pid:tid [device] ": the device is not a rank, but NCCL states each process's
# rank in its communicator once ("comm 0x7fa4.. rank 0 nranks 2" in 2.2, "... rank 3 nRanks 8 nNodes 1 ..."
# and "ncclCommInitRank comm 0x.. rank 1 nranks 2 cudaDev 1 ..." later). Lines of that process are then that rank's.
NCCL_PROCESS = re.compile(r"(?P<proc>(?=[\w.-]*[A-Za-z])[\w.-]+:\d+):\d+ \[\d+\] ")
NCCL_COMM_RANK = re.compile(r"\bcomm 0x[0-9a-f]+ rank (?P<rank>\d+) n[Rr]anks (?P<n>\d+)")
# later releases say where the rank sits: "comm 0x.. rank 7 nRanks 16 nNodes 2 localRanks 8 localRank 7 MNNVL 0"
NCCL_LOCAL = re.compile(r"\bnNodes (?P<nodes>\d+) localRanks \d+ localRank (?P<local>\d+)\b")


def _nccl_process(text: str) -> re.Match[str] | None:
    """NCCL's host:pid:tid [device] column of a line, also behind what a log collector put in front of the whole
    line (its timestamp, kubectl's or docker compose's container, Ray's or SkyPilot's process)."""
    start = 0
    for _ in range(3):
        p = NCCL_PROCESS.match(text, start)
        if p is not None:
            return p
        m = next((m for rx in _COLLECTORS if (m := rx.match(text, start))), None)
        if m is None:
            return None
        start = m.end()
    return None


class NcclRanks:
    """The global rank of each NCCL process (host:pid), from its communicator lines. Only communicators
    of the largest size seen count (a tensor- or pipeline-parallel group's rank is not the global one),
    and a process that states two ranks for that size has none."""

    MAX_HOSTS = 4096

    def __init__(self) -> None:
        self.size = 0
        self.ranks: dict[str, int | None] = {}
        self.hosts: set[str] = set()               # hosts of the NCCL lines seen
        self.offsets: dict[str, set[int]] = {}     # host -> global rank minus local rank, from "localRank N"
        self.nodes: int | None = None              # nNodes of the largest communicator

    def see(self, text: str) -> None:
        """Note the host of an NCCL debug line."""
        p = _nccl_process(text)
        if p is not None and len(self.hosts) < self.MAX_HOSTS:
            self.hosts.add(p["proc"].rsplit(":", 1)[0])

    def read(self, text: str) -> bool:
        """Learn from one line; True when it stated a process's rank."""
        m = NCCL_COMM_RANK.search(text)
        p = _nccl_process(text) if m else None
        if p is None:
            return False
        rank, size = int(m["rank"]), int(m["n"])
        if size < 2 or size < self.size:
            return True
        if size > self.size:
            self.size, self.ranks, self.offsets, self.nodes = size, {}, {}, None
        known = self.ranks.get(p["proc"], rank)
        self.ranks[p["proc"]] = rank if known == rank else None
        where = NCCL_LOCAL.search(text)
        if where is not None:
            self.nodes = int(where["nodes"])
            self.offsets.setdefault(p["proc"].rsplit(":", 1)[0], set()).add(rank - int(where["local"]))
        return True

    def global_of_local(self, text: str, local: int) -> int | None:
        """The global rank of local rank `local` on the host of NCCL line `text` ("Connection closed by localRank
        N" names a rank of that node): the host's offset where NCCL stated one; the local rank itself on one
        node (nNodes 1, or a single host in the log); None where the log shows several nodes and no offset."""
        p = _nccl_process(text)
        host = p["proc"].rsplit(":", 1)[0] if p else None
        offsets = self.offsets.get(host, set()) if host else set()
        if len(offsets) == 1:
            return local + next(iter(offsets))
        if offsets:
            return None
        if self.nodes == 1 or (self.nodes is None and len(self.hosts | ({host} if host else set())) == 1):
            return local
        return None

    def rank_of(self, text: str) -> int | None:
        """The rank of the NCCL process that wrote an NCCL debug line, when it stated one."""
        if not self.ranks:
            return None
        p = _nccl_process(text)
        return self.ranks.get(p["proc"]) if p else None
