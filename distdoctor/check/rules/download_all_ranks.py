"""DD303: a download or shared directory creation on every rank with no main-process guard plus barrier.

`torchvision.datasets.X(download=True)`, `urlretrieve`, `gdown.download` or `os.makedirs(d)` without
`exist_ok=True` run by every rank at once: the ranks overwrite each other's partial files or one gets
FileExistsError. Download on the main process, `barrier()`, then load everywhere. Hugging Face
`from_pretrained` / `load_dataset` lock their cache and are not reported.
"""

from __future__ import annotations

from distdoctor.check import api
from distdoctor.check.base import FileResult, RuleInfo
from distdoctor.check.rules._everyone import on_every_rank, report

RULE = RuleInfo("DD303", "download_race", "download or directory creation on every rank without guard and barrier")

FETCHERS = frozenset({"urllib.request.urlretrieve", "gdown.download", "wget.download", "urlretrieve",
                      "torch.hub.download_url_to_file", "download_url", "download_and_extract_archive"})


def _what(model, site) -> str | None:
    if site.name in FETCHERS or site.ident in ("urlretrieve", "download_url", "download_and_extract_archive"):
        return f"{site.ident}(...)"
    download = api.first_arg(site, "download", 99)
    if download is not None and model.code(download) == "True":
        return f"{site.ident}(..., download=True)"
    if site.name in ("os.makedirs", "os.mkdir"):
        exist_ok = api.first_arg(site, "exist_ok", 2 if site.ident == "makedirs" else 99)
        if exist_ok is None or model.code(exist_ok) == "False":
            return f"{site.name}(...) without exist_ok=True"
    return None


def check(model, out: FileResult) -> None:
    for site in model.sites:
        what = _what(model, site)
        if what is None or not on_every_rank(model, site) or api.barrier_before(model, site):
            continue
        if any(api.mentions_rank(model, v) for a in site.node.args for v in api.values_of(model, site, a.value)):
            continue  # a per-rank path
        report(model, out, RULE, site, f"{what} runs on every rank at once: they race on the same files; do it on "
                                       f"the main process, barrier(), then read it everywhere")


VALID = [
    # main process first, then everyone
    "import torch.distributed as dist\nimport torchvision\nif dist.get_rank() == 0:\n"
    "    torchvision.datasets.MNIST('data', download=True)\ndist.barrier()\nds = torchvision.datasets.MNIST('data')\n",
    # the balanced pattern
    "import torch.distributed as dist\nimport torchvision\n\ndef data(rank):\n    if rank != 0:\n        dist.barrier()\n"
    "    ds = torchvision.datasets.MNIST('data', download=True)\n    if rank == 0:\n        dist.barrier()\n    return ds\n",
    "import os\nimport torch.distributed as dist\nos.makedirs('out', exist_ok=True)\n",
    # a per-rank folder
    "import torch.distributed as dist\nimport torchvision\n\ndef data(path, rank):\n    path = path / str(rank)\n"
    "    return torchvision.datasets.CIFAR10(path, download=True)\n",
    "import torchvision\nwith accelerator.main_process_first():\n    ds = torchvision.datasets.CIFAR10('d', download=True)\n",
    # the launcher makes the folder once, then mp.spawn starts the ranks
    "import os\nimport torch.distributed as dist\nimport torch.multiprocessing as mp\n\ndef main(gpu, args):\n"
    "    dist.init_process_group('gloo', rank=gpu, world_size=2)\n\nif __name__ == '__main__':\n"
    "    if not os.path.exists('out'):\n        os.makedirs('out')\n    mp.spawn(main, args=(None,), nprocs=2)\n",
]

INVALID = [
    ("import torch.distributed as dist\nimport torchvision\ndist.init_process_group('gloo')\n"
     "ds = torchvision.datasets.MNIST('data', download=True)\n", 4),
    ("import os\nimport torch.distributed as dist\ndist.init_process_group('gloo')\nif not os.path.exists('out'):\n"
     "    os.makedirs('out')\n", 5),
    # the same folder made inside the spawned function: every rank
    ("import os\nimport torch.distributed as dist\nimport torch.multiprocessing as mp\n\ndef main(gpu, args):\n"
     "    dist.init_process_group('gloo', rank=gpu, world_size=2)\n    os.makedirs('out')\n\n"
     "if __name__ == '__main__':\n    mp.spawn(main, args=(None,), nprocs=2)\n", 7),
]
