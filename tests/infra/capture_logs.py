#!/usr/bin/env python3
"""Re-create the corpus logs tests/data/logs/slurm_*.log and netns_*.log from real runs (root needed).

  python tests/infra/capture_logs.py [slurm] [netns]

slurm: starts the one-node cluster (tests/infra/slurm.sh), runs srun --label with one task dying, and
srun without the RANK mapping; netns: two network namespaces, the generic-ssh profile's torchrun commands
without GLOO_SOCKET_IFNAME. Each log is written with its .meta.yaml.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import yaml  # noqa: E402

from distdoctor.launch import render  # noqa: E402

LOGS = ROOT / "tests" / "data" / "logs"
# Logs the knowledge base does not name yet (tests/test_diagnose_corpus.py would fail on them): kept here
# until references/ gain the signatures, then moved into tests/data/logs.
PENDING_DIR = HERE / "pending_logs"
PENDING = {"netns_no_ifname", "netns_no_ifname_hung_node", "slurm_no_rank_mapping"}
PY = sys.executable
TORCH = "torch 2.13.0+cpu, gloo"


def write(name: str, text: str, meta: dict) -> None:
    folder = PENDING_DIR if name in PENDING else LOGS
    (folder / f"{name}.log").write_text(text, encoding="utf-8")
    (folder / f"{name}.meta.yaml").write_text(yaml.safe_dump(meta, sort_keys=False, width=110), encoding="utf-8")
    print(f"wrote {name}.log ({len(text.splitlines())} lines)", file=sys.stderr)


def slurm() -> None:
    env = {**os.environ, "SLURM_CONF": os.environ.get("DISTDOCTOR_SLURM_DIR", "/tmp/distdoctor-slurm") + "/slurm.conf"}
    subprocess.run(["bash", str(HERE / "slurm.sh"), "start"], check=True)
    try:
        train = str(HERE / "ddp_train.py")
        mapped = ("export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS "
                  "MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1) MASTER_PORT=29671; ")
        cmd = ["srun", "-n2", "--label", "--kill-on-bad-exit=1", "bash", "-c",
               mapped + f"exec {PY} {train} --steps 6 --die-rank 1 --die-step 2 --timeout 60"]
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT, timeout=120)
        write("slurm_task_dies", res.stdout + res.stderr, {
            "source": "produced here: srun -n2 --label --kill-on-bad-exit=1 bash -c 'export RANK=$SLURM_PROCID "
                      "LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS MASTER_ADDR=... MASTER_PORT=29671; exec python "
                      f"tests/infra/ddp_train.py --steps 6 --die-rank 1 --die-step 2 --timeout 60' (Slurm 22.05, one node), {TORCH}",
            "expected_cause": "peer_died_first", "first_failure_rank": 1,
            "context": "two-task Slurm job; one task raises at step 2, kill-on-bad-exit ends the step",
            "notes": "srun --label prefixes each line with the task id (= RANK). stdout and stderr captured "
                     "separately and concatenated (stdout first)."})
        cmd = ["srun", "-n2", "--label", "--kill-on-bad-exit=1", PY, train, "--steps", "2", "--timeout", "20"]
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT, timeout=120)
        write("slurm_no_rank_mapping", res.stdout + res.stderr, {
            "source": f"produced here: srun -n2 --label --kill-on-bad-exit=1 python tests/infra/ddp_train.py --steps 2 "
                      f"--timeout 20 (Slurm 22.05, one node; RANK/WORLD_SIZE/MASTER_* not mapped), {TORCH}",
            "expected_cause": "slurm_launch", "first_failure_rank": None,
            "context": "srun starts the script directly, without exporting RANK from SLURM_PROCID",
            "notes": "every task fails in init_process_group(env://) because RANK is not set"})
    finally:
        subprocess.run(["bash", str(HERE / "slurm.sh"), "stop"], check=False)


def netns() -> None:
    from netns import two_nodes
    from distdoctor.procs import kill_tree

    train = str(HERE / "ddp_train.py")
    with two_nodes("cap") as nodes:
        r = render("generic-ssh", train, ["--steps", "3", "--timeout", "10", "--watchdog", "8"],
                   master_addr=nodes[0].addr, master_port=29681, torchrun=f"{PY} -m torch.distributed.run")
        outs = [Path(f"/tmp/distdoctor-netns-node{i}.log") for i in (0, 1)]
        procs = [subprocess.Popen(n.cmd(["bash", "-c", c]), stdout=open(o, "w"), stderr=subprocess.STDOUT,
                                  start_new_session=True, cwd=ROOT) for n, c, o in zip(nodes, r.commands, outs)]
        deadline = time.time() + 40
        while time.time() < deadline and all(p.poll() is None for p in procs):
            time.sleep(0.2)
        time.sleep(12)  # let the surviving node's watchdog dump its stacks, as a user would wait
        for p in procs:
            kill_tree(p.pid)
            p.wait()
        texts = [o.read_text(encoding="utf-8", errors="replace") for o in outs]
        failed = next(i for i, t in enumerate(texts) if "Connection refused" in t and "Traceback" in t)
        hung = 1 - failed
        base = (f"produced here: two network namespaces joined by a veth pair (10.77.0.1, 10.77.0.2), node {{i}} of: "
                f"{r.commands[0].replace(PY, 'python').replace('--node_rank=0', '--node_rank={i}')} (no GLOO_SOCKET_IFNAME), {TORCH}")
        write("netns_no_ifname", texts[failed], {
            "source": base.format(i=failed), "expected_cause": "gloo_hostname_loopback", "first_failure_rank": failed,
            "context": "two nodes, torchrun on each, rendezvous on node 0's address reaches; training never starts",
            "notes": "gloo binds the address of the host name (127.0.0.1 in the namespace) and advertises it to the "
                     "other node, which gets Connection refused; the fix is GLOO_SOCKET_IFNAME=<veth>."})
        write("netns_no_ifname_hung_node", texts[hung], {
            "source": base.format(i=hung) + "; killed after its watchdog dumped the stacks",
            "expected_cause": "rendezvous_unreachable", "first_failure_rank": None,
            "context": "the other node of netns_no_ifname: it hangs in init_process_group past its timeout",
            "notes": "distdoctor.tracer watchdog (8 s) shows the rank stuck in init_process_group / ProcessGroupGloo."})
        for o in outs:
            o.unlink(missing_ok=True)


if __name__ == "__main__":
    todo = sys.argv[1:] or ["slurm", "netns"]
    for what in todo:
        {"slurm": slurm, "netns": netns}[what]()
