"""First-seen measure of the answer levels on the TRAIN corpus, as history lived it.

For every commit C that added train corpus cases: check C out in a temporary detached worktree, delete the
cases C added from its evals/corpus/ (retrieval and template matching cannot find the case itself), and diagnose
each added TRAIN case with `text: printed` with C's own code, the knowledge base and corpus as they were then.
Each record: the expected cause, the top cause, verdict, the top cause's level, the structural origin
(template matched to an `entry:` or a `corpus:` case, or a reader: collective mismatch, versions, store wait,
p2p matrix, gpu processes), right or wrong.

Held-out cases are never read beyond their `split:` line: a held-out meta's other lines are not parsed, its id
is discarded unprinted, and its log is never opened.

    python -m distdoctor.evals.first_seen --repo /work/main --out /tmp/first_seen.jsonl
    python -m distdoctor.evals.first_seen --summary /tmp/first_seen.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CORPUS = "evals/corpus"

# Run in one interpreter per commit (the commit's code on PYTHONPATH): `distdoctor diagnose LOG --json` per log,
# one JSON line per log on stdout (the index is loaded once, not per log).
RUNNER = r"""
import contextlib, io, json, sys
from distdoctor.cli import main
for log in sys.argv[1:]:
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            try:
                main(["diagnose", log, "--json"])
            except SystemExit:
                pass
        print(json.dumps(json.loads(buf.getvalue())), flush=True)
    except Exception as e:
        print(json.dumps({"error": repr(e)[:300]}), flush=True)
"""


def git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True).stdout


def batch_commits(repo: str, rev: str = "HEAD") -> list[str]:
    """Commits (oldest first) that added a corpus meta file."""
    out = git(repo, "log", "--reverse", "--diff-filter=A", "--format=%H", rev, "--", f"{CORPUS}/*.meta.yaml")
    return [h for h in out.split() if h]


def added_metas(repo: str, commit: str) -> list[str]:
    """Paths of the corpus meta files the commit added."""
    out = git(repo, "diff-tree", "--no-commit-id", "--root", "--name-only", "--diff-filter=A", "-r", commit,
              "--", f"{CORPUS}/*.meta.yaml")
    return [p for p in out.splitlines() if p.endswith(".meta.yaml")]


def added_cases(repo: str, commit: str) -> list[str]:
    """Ids of the corpus cases (a .log or a .meta.yaml) the commit added."""
    out = git(repo, "diff-tree", "--no-commit-id", "--root", "--name-only", "--diff-filter=A", "-r", commit,
              "--", CORPUS)
    ids = set()
    for p in out.splitlines():
        name = p.rsplit("/", 1)[-1]
        for suf in (".meta.yaml", ".log"):
            if name.endswith(suf):
                ids.add(name[: -len(suf)])
    return sorted(ids)


def split_of(meta_text: str) -> str | None:
    """The `split:` value, read from that line alone."""
    for line in meta_text.splitlines():
        m = re.match(r"split:\s*(\S+)", line)
        if m:
            return m.group(1).strip("'\"")
    return None


def field(meta_text: str, name: str) -> str | None:
    """A top-level scalar of a TRAIN meta (never called on a held-out one)."""
    for line in meta_text.splitlines():
        m = re.match(rf"{name}:\s*(.*?)\s*(#.*)?$", line)
        if m:
            return m.group(1).strip("'\"") or None
    return None


def train_cases(repo: str, commit: str) -> list[dict]:
    """The printed TRAIN cases the commit added: [{"id", "cause", "confidence"}]. Held-out metas are read to
    their `split:` line only and dropped without a trace."""
    out = []
    for path in added_metas(repo, commit):
        text = git(repo, "show", f"{commit}:{path}")
        if split_of(text) != "train":
            continue  # held out (or unsplit): discard, print nothing
        if (field(text, "text") or "printed") != "printed":
            continue
        cid = path.rsplit("/", 1)[-1][: -len(".meta.yaml")]
        out.append({"id": cid, "cause": field(text, "cause"), "confidence": field(text, "confidence")})
    return out


def origin(evidence: list[dict]) -> str | None:
    """Which structural evidence made the cause structural."""
    kinds = []
    for ev in evidence:
        if (ev.get("level") or ev.get("kind")) != "structural" and ev.get("kind") != "structural":
            continue
        p = ev.get("proves") or ""
        m = re.search(r"message template as a known \S+ failure \((\S+?):? ", p)
        if m:  # a knowledge-base entry is quoted by its references/ path, a corpus case by its source or corpus: id
            kinds.append("template:entry" if m.group(1).startswith("references/") else "template:corpus")
        elif "message template" in p:
            kinds.append("template:entry" if "references/" in p else "template:corpus")
        elif re.search(r"ranks? \d+ .*ran ", p):
            kinds.append("reader:collective_mismatch")
        elif "P2P" in p or "p2p" in p:
            kinds.append("reader:p2p_matrix")
        elif re.search(r"version|too old|built with", p, re.I):
            kinds.append("reader:versions")
        elif re.search(r"store|waiting|barrier", p, re.I):
            kinds.append("reader:store_wait")
        elif re.search(r"process|GPU", p):
            kinds.append("reader:gpu_processes")
        else:
            kinds.append("reader:other")
    return kinds[0] if kinds else None


def record(case: dict, report: dict) -> dict:
    causes = report.get("causes") or []
    top = causes[0] if causes else {}
    top3 = [c.get("id") for c in causes[:3]]
    return {**case, "top": top.get("id"), "verdict": report.get("verdict"), "level": top.get("level"),
            "origin": origin(top.get("evidence") or []) if top.get("level") == "structural" else None,
            "proves": [ev.get("proves") for ev in (top.get("evidence") or [])
                       if ev.get("kind") == "structural"][:2],
            "right": top.get("id") == case["cause"], "top3": case["cause"] in top3}


def run_commit(repo: str, commit: str, python: str, work: Path) -> list[dict]:
    cases = train_cases(repo, commit)
    if not cases:
        return []
    short = commit[:7]
    tree = work / f"calib-{short}"
    logs = work / f"logs-{short}"
    logs.mkdir(parents=True, exist_ok=True)
    git(repo, "worktree", "add", "--detach", str(tree), commit)
    out = []
    try:
        for c in cases:
            shutil.copy(tree / CORPUS / f"{c['id']}.log", logs / f"{c['id']}.log")
        for cid in added_cases(repo, commit):  # the batch, train and held out, leaves C's corpus
            for suf in (".log", ".meta.yaml"):
                (tree / CORPUS / f"{cid}{suf}").unlink(missing_ok=True)
        env = {**os.environ, "PYTHONPATH": str(tree), "XDG_CACHE_HOME": str(work / f"cache-{short}")}
        paths = [str(logs / f"{c['id']}.log") for c in cases]
        p = subprocess.run([python, "-c", RUNNER, *paths], cwd=tree, env=env, capture_output=True, text=True,
                           timeout=120 + 60 * len(cases))
        reports = dict(zip(paths, p.stdout.splitlines()))
        for c, path in zip(cases, paths):
            try:
                rep = json.loads(reports[path])
                if "error" in rep and "causes" not in rep:
                    raise ValueError(rep["error"])
            except (KeyError, ValueError) as e:
                out.append({**c, "commit": short, "error": f"{e} {(p.stderr or '')[-300:]}"})
                continue
            out.append({**record(c, rep), "commit": short})
    finally:
        git(repo, "worktree", "remove", "--force", str(tree))
        shutil.rmtree(logs, ignore_errors=True)
        shutil.rmtree(work / f"cache-{short}", ignore_errors=True)
    return out


def summarize(rows: list[dict]) -> dict:
    """Right/total per level, per structural origin, per level x confidence label."""
    rows = list({(r.get("commit"), r.get("id")): r for r in rows}.values())  # a resumed run may repeat a case
    pre = [r for r in rows if "error" not in r and "verdict" in r and r["verdict"] is None]
    rows = [r for r in rows if r not in pre]  # a commit whose JSON has no verdict or level predates the levels
    ok = [r for r in rows if "error" not in r]
    for r in ok:  # origins are re-read from the recorded proofs (the reading may have improved since the run)
        if r.get("level") == "structural" and r.get("proves"):
            r["origin"] = origin([{"kind": "structural", "proves": p} for p in r["proves"]])
    agg: dict[str, Counter] = defaultdict(Counter)
    for r in ok:
        keys = [f"level={r['level']}", f"level={r['level']}|conf={r['confidence']}",
                f"verdict={r['verdict']}", "all"]
        if r.get("origin"):
            keys += [f"origin={r['origin']}", f"origin={r['origin']}|conf={r['confidence']}"]
        for k in keys:
            agg[k]["n"] += 1
            agg[k]["right"] += int(r["right"])
    return {"cases": len(rows), "errors": len(rows) - len(ok), "pre_levels_dropped": len(pre),
            "table": {k: f"{v['right']}/{v['n']} ({100 * v['right'] // max(v['n'], 1)}%)"
                      for k, v in sorted(agg.items())}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", default=".", help="the git repository (its history is read, its files untouched)")
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--python", default=sys.executable, help="the interpreter that runs each commit's code")
    ap.add_argument("--out", help="JSON lines, one per case, appended as they come")
    ap.add_argument("--newest", type=int, default=0, help="only the newest N batch commits (0: all)")
    ap.add_argument("-j", type=int, default=1, help="commits run at once")
    ap.add_argument("--summary", help="summarize an --out file and exit")
    a = ap.parse_args(argv)
    if a.summary:
        rows = [json.loads(x) for x in Path(a.summary).read_text().splitlines() if x.strip()]
        print(json.dumps(summarize(rows), indent=1))
        return 0
    commits = batch_commits(a.repo, a.rev)
    if a.out and Path(a.out).exists():  # resume: skip the commits already recorded
        done = {json.loads(x).get("commit") for x in Path(a.out).read_text().splitlines() if x.strip()}
        commits = [c for c in commits if c[:7] not in done]
    if a.newest:
        commits = commits[-a.newest:]
    work = Path(tempfile.mkdtemp(prefix="first-seen-"))
    sink = open(a.out, "a") if a.out else None
    rows: list[dict] = []

    def one(i_c: tuple[int, str]) -> list[dict]:
        i, c = i_c
        got = run_commit(a.repo, c, a.python, work)
        print(f"[{i + 1}/{len(commits)}] {c[:7]}: {len(got)} train printed cases", file=sys.stderr, flush=True)
        if sink:
            for r in got:
                sink.write(json.dumps(r) + "\n")
            sink.flush()
        return got

    with ThreadPoolExecutor(max_workers=a.j) as ex:
        for got in ex.map(one, list(enumerate(reversed(commits)))):  # newest first
            rows += got
    if not a.out:
        print(json.dumps({"summary": summarize(rows), "rows": rows}, indent=1))
    else:
        print(json.dumps(summarize(rows), indent=1))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
