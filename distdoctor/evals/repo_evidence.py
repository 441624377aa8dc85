"""Measure `diagnose LOG --repo PROGRAM` against the log alone, on our own programs and their real logs.

Pairs: every committed real log in tests/data/logs whose meta names an evals/programs/fail_*, hang_* or check_*
program, and tests/data/repo_logs (the check_* programs' own runs, tests/data/make_repo_logs.py). Right first:
the first cause printed (top or first candidate) is the log's expected_cause; confident and right: the verdict
is confident too. False promotion: every log of tests/data/logs whose log-only answer is confident and right,
diagnosed with --repo of all the programs with findings except those with a finding of its own cause (a repo
whose findings are all unrelated to it): its top must stay. Real repositories (--real DIR: folders of
checked-out repositories, e.g. /tmp/rr3/src): each is checked, then a few symptom logs are diagnosed with it.

    python -m distdoctor.evals.repo_evidence [--write docs/repo-evidence.md] [--real /tmp/rr3/src]
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time
from pathlib import Path

import yaml

from distdoctor.diagnose import code_evidence
from distdoctor.diagnose.engine import diagnose_paths
from distdoctor.paths import ROOT

LOG_DIRS = (ROOT / "tests" / "data" / "logs", ROOT / "tests" / "data" / "repo_logs")
PREFIXES = ("fail_", "hang_", "check_")
# symptom logs for the real repositories: real committed logs whose answer is a symptom or candidates only
SYMPTOM_LOGS = ("public_collective_timeout_basicsr", "public_collective_timeout_llamafactory",
                "public_collective_timeout_ofa", "field_nanogpt_heartbeat_timeout", "field_olmo_connection_closed",
                "gen_rank0_allreduce_logdir")


def _log_of(meta: Path) -> Path | None:
    base = meta.with_name(meta.name[: -len(".meta.yaml")])
    for p in (base.with_suffix(".log"), base.with_name(base.name + ".d")):
        if p.exists():
            return p
    return None


def cases() -> list[dict]:
    """Every committed (log, meta) with its meta loaded."""
    out = []
    for folder in LOG_DIRS:
        for meta in sorted(folder.glob("*.meta.yaml")):
            log = _log_of(meta)
            if log is not None:
                out.append({"name": meta.name[: -len(".meta.yaml")], "log": str(log),
                            **yaml.safe_load(meta.read_text(encoding="utf-8"))})
    return out


def pairs(all_cases: list[dict]) -> list[dict]:
    return [c for c in all_cases if os.path.basename(c.get("program") or "").startswith(PREFIXES)]


_CHECKED: dict[tuple[str, ...], dict] = {}


def checked(paths: tuple[str, ...]) -> dict:
    if paths not in _CHECKED:
        _CHECKED[paths] = code_evidence.check(list(paths))
    return _CHECKED[paths]


def _first(r: dict) -> str | None:
    return r["causes"][0]["id"] if r["causes"] else None


def _diagnose(case: dict, code: dict | None) -> dict:
    return diagnose_paths([case["log"]], case.get("context"), code=code)


def measure_pairs(items: list[dict]) -> dict:
    rows = []
    for c in items:
        code = checked((c["program"],))
        before, after = _diagnose(c, None), _diagnose(c, code)
        rows.append({"name": c["name"], "program": c["program"], "expected": c["expected_cause"],
                     "findings": sorted({f"{f['code']} {f['cause']}" for f in code["findings"]}),
                     "before": (_first(before), before["verdict"]), "after": (_first(after), after["verdict"]),
                     "rule": after["code"]["rule"], "also": c.get("also") or []})

    def count(key: str, confident: bool, also: bool = False) -> int:
        return sum((r[key][0] == r["expected"] or also and r[key][0] in r["also"])
                   and (not confident or r[key][1] == "confident") for r in rows)

    return {"rows": rows, "n": len(rows), "with_findings": sum(bool(r["findings"]) for r in rows),
            "top1": (count("before", False), count("after", False)),
            "top1_also": (count("before", False, True), count("after", False, True)),
            "confident": (count("before", True), count("after", True))}


def measure_false_promotion(all_cases: list[dict], programs: list[dict]) -> dict:
    """Confident, right log-only answers diagnosed beside a repo of unrelated findings."""
    by_program = {p: checked((p,)) for p in sorted({c["program"] for c in programs})}
    with_findings = {p: {f["cause"] for f in code["findings"]} for p, code in by_program.items() if code["findings"]}
    kept, moved, n = 0, [], 0
    for c in all_cases:
        if c["name"].startswith("check_"):
            continue
        before = _diagnose(c, None)
        if before["verdict"] != "confident" or _first(before) != c["expected_cause"]:
            continue
        own = {c["expected_cause"], *(c.get("also") or [])}
        repo = tuple(p for p, causes in with_findings.items() if not causes & own)
        after = _diagnose(c, checked(repo))
        n += 1
        if _first(after) == _first(before) and after["verdict"] == "confident":
            kept += 1
        else:
            moved.append((c["name"], _first(before), _first(after), after["code"]["rule"]))
    return {"n": n, "kept": kept, "moved": moved, "repo_programs": len(with_findings)}


def measure_real(root: str, all_cases: list[dict]) -> list[dict]:
    """Each repository under root checked once, then diagnosed beside each symptom log."""
    logs = [c for c in all_cases if c["name"] in SYMPTOM_LOGS]
    out = []
    for repo in sorted(p for p in Path(root).iterdir() if p.is_dir()):
        t0 = time.process_time()
        code = code_evidence.check([str(repo)], cache=False)
        cpu = time.process_time() - t0
        causes = collections.Counter(f["cause"] for f in code["findings"])
        promoted = []
        for c in logs:
            r = _diagnose(c, code)
            if r["code"]["promoted"]:
                top = [f for f in r["code"]["findings"] if f["role"] == "top"][0]
                promoted.append(f"{c['name']}: {r['code']['over'] or _first(r)} -> {r['code']['promoted']} "
                                f"({top['code']} {os.path.relpath(top['path'], repo)}:{top['line']})")
        out.append({"repo": repo.name, "files": code["files"], "findings": dict(causes.most_common()),
                    "cpu_s": round(cpu, 1), "promoted": promoted})
    return out


def report(p: dict, fp: dict, real: list[dict] | None, real_root: str | None) -> str:
    out = ["# Evidence beyond the log: `diagnose LOG --repo PATH`", "",
           "Written by `python -m distdoctor.evals.repo_evidence --write docs/repo-evidence.md"
           + (f" --real {real_root}" if real_root else "") + "` (rule: distdoctor/diagnose/code_evidence.py).", "",
           "## Our programs and their real logs", "",
           f"{p['n']} real logs of evals/programs/fail_*, hang_* and check_* programs (tests/data/logs, "
           f"tests/data/repo_logs); the checker finds something in the program of {p['with_findings']}. (No hang_* "
           "program has a committed log: they are the hang doctor's, with 300 s group timeouts.) Right = the log's "
           "`expected_cause`; the DETAIL-segfault pair is labelled collective_timeout (what the user was debugging) "
           "with rank_conditional_collective, the program's own cause, in `also`.", "",
           "| | log alone | log + --repo |", "|---|---|---|",
           f"| expected cause first | {p['top1'][0]}/{p['n']} | {p['top1'][1]}/{p['n']} |",
           f"| confident and right | {p['confident'][0]}/{p['n']} | {p['confident'][1]}/{p['n']} |",
           f"| expected cause or one of its meta's `also` first | {p['top1_also'][0]}/{p['n']} | "
           f"{p['top1_also'][1]}/{p['n']} |", "",
           "Logs whose answer changed, or whose program has findings:", "",
           "| log | expected | program's findings | log alone | with --repo | rule |", "|---|---|---|---|---|---|"]
    for r in p["rows"]:
        if r["findings"] or r["before"] != r["after"]:
            out.append(f"| {r['name']} | {r['expected']} | {', '.join(r['findings']) or '-'} | "
                       f"{r['before'][0]} ({r['before'][1]}) | {r['after'][0]} ({r['after'][1]}) | {r['rule']} |")
    out += ["", "## False promotion", "",
            f"{fp['n']} logs of tests/data/logs whose log-only answer is confident and right, each diagnosed with "
            f"--repo of the programs with findings ({fp['repo_programs']}) less those with a finding of its own "
            f"cause: **{fp['kept']}/{fp['n']} keep their top**."]
    if fp["moved"]:
        out += ["", "Moved (the log's top is a symptom cause with no own error of the failing rank: the rule lets "
                "consistent code evidence take it):", ""]
        out += [f"- {name}: {a} -> {b} ({rule})" for name, a, b, rule in fp["moved"]]
    if real is not None:
        out += ["", "## Real repositories", "",
                f"Repositories on disk under {real_root} (docs/real-repos.md), checked whole; symptom logs "
                f"{', '.join(SYMPTOM_LOGS)} diagnosed with each.", "",
                "| repository | files | findings by cause | checker CPU s | promoted (log: from -> to, finding) |",
                "|---|---|---|---|---|"]
        for r in real:
            f = ", ".join(f"{k} {v}" for k, v in r["findings"].items()) or "-"
            out.append(f"| {r['repo']} | {r['files']} | {f} | {r['cpu_s']} | {'; '.join(r['promoted']) or '-'} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="repo_evidence", description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", metavar="FILE", help="write the report there (default: print it)")
    ap.add_argument("--real", metavar="DIR", help="a folder of checked-out repositories to check")
    args = ap.parse_args(argv)
    if args.real and not os.path.isdir(args.real):
        print(f"repo_evidence: error: --real {args.real}: not a folder", file=sys.stderr)
        return 2
    all_cases = cases()
    items = pairs(all_cases)
    p = measure_pairs(items)
    fp = measure_false_promotion(all_cases, items)
    real = measure_real(args.real, all_cases) if args.real else None
    text = report(p, fp, real, args.real)
    if args.write:
        Path(args.write).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    from distdoctor.cli import quiet_on_broken_pipe

    sys.exit(quiet_on_broken_pipe(main))
