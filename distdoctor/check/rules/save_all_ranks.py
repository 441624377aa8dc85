"""DD301: `torch.save` (or `save_pretrained`, a file opened for writing) of one path on every rank.

Every rank writes the same file at once: the writes interleave (a corrupt checkpoint) or the last rank
wins with its own state. Guard the save with the main-process test (and a barrier before anyone reads
it), or put the rank in the path; `torch.distributed.checkpoint` is the collective way to save shards.
"""

from __future__ import annotations

import libcst as cst

from distdoctor.check import api
from distdoctor.check.base import FileResult, RuleInfo
from distdoctor.check.model import ident
from distdoctor.check.rules._everyone import on_every_rank, report
from distdoctor.patching.cstutil import literal_text, walk

RULE = RuleInfo("DD301", "checkpoint_all_ranks", "torch.save or a file write of one path on every rank")

BUFFERS = ("buf", "buffer", "stream", "bytes", "io", "fp", "fh")


def _target(model, site) -> cst.BaseExpression | None:
    """The path a save or write goes to, or None when it is not a file path this rule can judge."""
    if site.name == "torch.save":
        return api.first_arg(site, "f", 1)
    if site.ident in ("save_pretrained", "save_to_disk"):
        return api.first_arg(site, "save_directory", 0)
    if site.name in ("open", "io.open"):
        mode = api.first_arg(site, "mode", 1)
        text = literal_text(mode) if mode is not None else "r"
        if text and any(c in text for c in "wax"):
            return api.first_arg(site, "file", 0)
    return None


_PROCESS_UNIQUE = frozenset({"getpid", "uuid1", "uuid4"})
_COARSE = frozenset({"strftime", "int", "round", "date"})  # a clock cut to seconds or days is shared by the ranks


def _per_process(value: cst.CSTNode) -> bool:
    """A name part that differs between processes: the pid, a uuid, or the full `datetime.now()` (microseconds;
    DLRM's `str(datetime.datetime.now())` profile files), not a clock cut by strftime/int/round/date."""
    calls = {ident(n.func) for n in walk(value) if isinstance(n, cst.Call)}
    attrs = {n.attr.value for n in walk(value) if isinstance(n, cst.Attribute)}
    return bool(calls & _PROCESS_UNIQUE) or bool(calls & {"now", "utcnow"}) and not (calls | attrs) & _COARSE


def _in_dataset(model, site) -> bool:
    """A method of a map-style Dataset (`class TextAudioLoader(torch.utils.data.Dataset)` caching one item's
    features next to it): the sampler hands each rank other items, so the ranks write other files."""
    node = model.classes.get(site.func.cls) if site.func.cls else None
    return node is not None and any(model.dotted(b.value).rsplit(".", 1)[-1] == "Dataset" for b in node.bases)


def check(model, out: FileResult) -> None:
    for site in model.sites:
        if site.ident not in ("save", "save_pretrained", "save_to_disk", "open"):
            continue
        path = _target(model, site)
        if path is None or not on_every_rank(model, site) or _in_dataset(model, site):
            continue
        values = api.values_of(model, site, path)
        if any(api.mentions_rank(model, v) or _per_process(v) or (ident(v) or "").lower().endswith(BUFFERS)
               or "devnull" in model.code(v)
               or isinstance(v, cst.Call) and ident(v.func) in ("BytesIO", "StringIO", "TemporaryDirectory",
                                                                "mkdtemp", "NamedTemporaryFile", "mkstemp")
               for v in values):
            continue
        if site.ident == "open" and any(isinstance(n, cst.Name) and n.value in site.func.params
                                        for v in values for n in walk(v)):
            continue  # a path the caller chose (it may carry the rank): judged where it is built
        if api.barrier_before(model, site) and site.ident != "open":
            continue
        what = "opens" if site.ident == "open" else "saves to"
        report(model, out, RULE, site, f"every rank {what} {model.code(path)}: the writes race and the last rank "
                                       f"wins; guard it with the main-process test or put the rank in the path")


VALID = [
    "import torch\nimport torch.distributed as dist\nif dist.get_rank() == 0:\n    torch.save(model.state_dict(), 'ckpt.pt')\n"
    "dist.barrier()\n",
    # per-rank path
    "import torch\nimport torch.distributed as dist\nrank = dist.get_rank()\ntorch.save(state, f'ckpt_rank{rank}.pt')\n",
    # a function only called on the main process
    "import torch\nimport torch.distributed as dist\n\ndef save(m):\n    torch.save(m.state_dict(), 'ckpt.pt')\n\n"
    "if dist.get_rank() == 0:\n    save(model)\n",
    # an early return on the other ranks
    "import torch\nimport torch.distributed as dist\n\ndef save(m):\n    if not is_main_process():\n        return\n"
    "    torch.save(m.state_dict(), 'ckpt.pt')\n",
    # not a distributed program
    "import torch\ntorch.save(model.state_dict(), 'ckpt.pt')\n",
    # the single-process branch (litgpt's API)
    "import torch\nimport lightning as L\n\ndef save(self, path):\n    if self.fabric is None:\n"
    "        torch.save(self.state_dict(), path)\n",
    # one rank at a time under a file lock (nanochat's download helper)
    "import torch.distributed as dist\nfrom filelock import FileLock\nwith FileLock('f.lock'):\n"
    "    with open('shard.bin', 'wb') as f:\n        f.write(data)\n",
    # a path the caller chose (improved-diffusion's logger gets per-rank file names)
    "import torch.distributed as dist\n\nclass Log:\n    def __init__(self, filename):\n"
    "        self.file = open(filename, 'wt')\n",
    # a file name with the full time of day or the pid: one name per process (DLRM's profile files)
    "import datetime\nimport torch.distributed as dist\ndist.init_process_group('gloo')\n"
    "stamp = str(datetime.datetime.now()).replace(' ', '_')\nwith open('prof' + stamp + '.txt', 'w') as f:\n"
    "    f.write(table)\n",
    "import os\nimport torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\n"
    "torch.save(state, f'ckpt_{os.getpid()}.pt')\n",
    # an in-memory buffer
    "import io\nimport torch\nimport torch.distributed as dist\nmem_file = io.BytesIO()\ntorch.save(ckpt, mem_file)\n",
    # two calls under the main-process-first block: rank 0 writes the cache, the others then find it and load
    # it (yolov7's create_dataloader -> LoadImagesAndLabels -> cache_labels)
    "import torch\nimport torch.distributed as dist\n\nclass Data:\n    def __init__(self, p):\n"
    "        self.cache = self.cache_labels(p)\n\n    def cache_labels(self, p):\n        torch.save(x, p)\n\n"
    "def loader(rank, p):\n    with torch_distributed_zero_first(rank):\n        return Data(p)\n",
    # two calls under the rank guard
    "import torch\nimport torch.distributed as dist\n\ndef write(m):\n    torch.save(m, 'ckpt.pt')\n\n"
    "def finish(m):\n    write(m)\n\nif dist.get_rank() == 0:\n    finish(model)\n",
    # the first rank of each data- and context-parallel group saves its tensor/pipeline shard (huggingface/picotron)
    "import torch\nimport torch.distributed as dist\n\nclass Saver:\n    def save(self, model, path):\n"
    "        dist.init_process_group('gloo')\n        if self.dp_rank == 0 and self.cp_rank == 0:\n"
    "            torch.save(model.state_dict(), path)\n",
    # a map-style Dataset caching one item's features beside its file (VITS's spectrogram cache): the sampler
    # gives each rank other items
    # a one-process nn.DataParallel script that only imports torch.distributed (a tutorial's ImageNet-style
    # imports): one process writes its log and checkpoint
    "import torch\nimport torch.distributed as dist\nimport torch.multiprocessing as mp\n\ndef main(model):\n"
    "    model = torch.nn.DataParallel(model).cuda()\n    with open('log.csv', 'a+') as f:\n        f.write('1')\n"
    "    torch.save(model.state_dict(), 'ckpt.pt')\n",
    "import os\nimport torch\nimport torch.distributed as dist\n\nclass Speech(torch.utils.data.Dataset):\n"
    "    def load(self, path):\n        spec_path = path + '.spec.pt'\n        if os.path.exists(spec_path):\n"
    "            return torch.load(spec_path)\n        spec = features(path)\n        torch.save(spec, spec_path)\n"
    "        return spec\n\n    def __getitem__(self, i):\n        return self.load(self.paths[i])\n",
]

INVALID = [
    ("import torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\n"
     "torch.save(model.state_dict(), 'ckpt.pt')\n", 4),
    ("import torch.distributed as dist\ndist.init_process_group('gloo')\nwith open('metrics.json', 'w') as f:\n"
     "    f.write(text)\n", 3),
    # two calls up, one caller is guarded and one is not: every rank reaches the save
    ("import torch\nimport torch.distributed as dist\n\ndef write(m):\n    torch.save(m, 'ckpt.pt')\n\n"
     "def finish(m):\n    write(m)\n\nif dist.get_rank() == 0:\n    finish(model)\nfinish(model)\n", 5),
    # a time of day cut to seconds is the same on every rank
    ("import time\nimport datetime\nimport torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\n"
     "stamp = datetime.datetime.now().strftime('%H%M%S')\ntorch.save(state, f'ckpt_{stamp}.pt')\n", 7),
    # DataParallel beside a process group: a distributed program
    ("import torch\nimport torch.distributed as dist\n\ndef main(model, args):\n    if args.distributed:\n"
     "        dist.init_process_group('gloo')\n    else:\n        model = torch.nn.DataParallel(model)\n"
     "    torch.save(model.state_dict(), 'ckpt.pt')\n", 9),
    # a class that is not a Dataset still saves one path on every rank
    ("import torch\nimport torch.distributed as dist\n\nclass Trainer:\n    def finish(self):\n"
     "        dist.init_process_group('gloo')\n        torch.save(self.model.state_dict(), 'ckpt.pt')\n", 7),
]
