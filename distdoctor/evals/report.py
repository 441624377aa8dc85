"""Render a Score (and closed-loop results) as terminal text and as evals/RESULTS.md."""

from __future__ import annotations

import datetime as _dt

from distdoctor.evals.e2e import LoopResult
from distdoctor.evals.scoring import Score

ORIGIN_WORDS = {"produced": "produced here (torch 2.13, gloo/CPU)", "public": "quoted from a public URL",
                "field": "field report (../shared/field-reports)", "words": "a person's words, no log",
                "other": "other"}


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def render_text(score: Score, loop: list[LoopResult] | None = None, confusions: int = 15, kinds: dict | None = None,
                agentic: list | None = None, ablation: dict | None = None) -> str:
    lines = [f"responder: {score.responder}", f"cases: {score.n}   top-1: {_pct(score.top1)}   "
             f"top-3: {_pct(score.top3)}   patch: {_pct(score.patch_accuracy)}   ({score.seconds:.1f}s)", "",
             f"{'cause':<28} {'n':>3} {'top-1':>7} {'top-3':>7}"]
    for cause, d in score.per_cause().items():
        lines.append(f"{cause:<28} {d['n']:>3} {_pct(d['top1']):>7} {_pct(d['top3']):>7}")
    conf = score.confusions()
    if conf:
        lines += ["", "confusions (expected -> got: count, cases):"]
        for e, g, n, ids in conf[:confusions]:
            lines.append(f"  {e} -> {g}: {n}  ({', '.join(ids[:4])}{', ...' if len(ids) > 4 else ''})")
        if len(conf) > confusions:
            lines.append(f"  ... {len(conf) - confusions} more pairs (see --json)")
    if loop:
        lines += ["", render_loop_text(loop)]
    if agentic:
        lines += ["", "agentic cases:"]
        for a in agentic:
            lines.append(f"  [{a.status.upper()}] {a.id} ({a.kind}, {a.seconds:.1f}s) {_clip(a.detail, 220)}")
    if kinds:
        lines += ["", "by kind:", f"  {'kind':<10} {'cases':>5} {'ran':>4} {'passed':>6} {'score':>7} {'skipped':>7}"]
        for k, d in kinds.items():
            lines.append(f"  {k:<10} {d['n']:>5} {d['ran']:>4} {d['passed']:>6} {_pct(d['rate']):>7} {d['skipped']:>7}")
    if ablation:
        lines += ["", render_ablation_text(ablation)]
    return "\n".join(lines)


KIND_WORDS = {"short_log": "short log (evals/cases.jsonl)", "words": "words only (evals/cases.jsonl)",
              "large_log": "large log (8-64 ranks, >= 100 MB)", "hang": "live hung job", "fix": "fix the repo, rerun"}


def render_ablation_text(ab: dict) -> str:
    lines = [f"with and without the skill ({ab.get('responder', '')}):",
             f"  {'kind':<10} {'cases':>5} {'with':>8} {'without':>8} {'lift':>8}"]
    for k, d in ab["kinds"].items():
        lift = "n/a" if d["lift"] is None else f"{d['lift'] * 100:+.1f}pt"
        lines.append(f"  {k:<10} {d['n']:>5} {_pct(d['with_rate']):>8} {_pct(d['without_rate']):>8} {lift:>8}")
    for c in ab["cases"][:40]:
        lines.append(f"  {c['change']:<6} {c['id']} ({c['kind']}): with -> {_clip(c['with_answer'], 60)}; "
                     f"without -> {_clip(c['without_answer'], 60)}")
    return "\n".join(lines)


def _kinds_markdown(kinds: dict) -> list[str]:
    md = ["", "## By kind", "",
          "Every responder gets these columns (the built-in tools here; an agent with `--agent-cmd` or `--agent`). "
          "Short-log and word cases score the first cause named; a large log also needs the first failing rank "
          "where the case knows it; a hang needs the cause, the odd rank(s) and the line they are stuck on; a fix "
          "passes when the rerun finishes on every rank with equal checksums and only the expected files changed.",
          "", "| kind | cases | ran | passed | score | skipped | seconds |", "|---|---:|---:|---:|---:|---:|---:|"]
    for k, d in kinds.items():
        md.append(f"| {KIND_WORDS.get(k, k)} | {d['n']} | {d['ran']} | {d['passed']} | **{_pct(d['rate'])}** | "
                  f"{d['skipped']} | {d['seconds']} |")
    return md


def _agentic_markdown(agentic: list) -> list[str]:
    md = ["", "## Agentic cases (evals/agentic/)", "",
          "| case | kind | result | checks | detail |", "|---|---|---|---|---|"]
    for a in agentic:
        checks = ", ".join(f"{k} {'✔' if v else '✘'}" for k, v in a.checks.items() if v is not None)
        md.append(f"| {a.id} | {a.kind} | **{a.status}** | {checks} | {_md(_clip(a.detail, 300))} |")
    return md


def _ablation_markdown(ab: dict) -> list[str]:
    md = ["", "## With and without the skill (`--ablate-skill`)", "",
          f"Responder: {_md(ab.get('responder', ''))}. Every case ran twice in a fresh workspace: once with the "
          "skill installed there (and `DISTDOCTOR_SKILL` set), once without either.", "",
          "| kind | cases | with the skill | without | lift |", "|---|---:|---:|---:|---:|"]
    for k, d in ab["kinds"].items():
        lift = "n/a" if d["lift"] is None else f"{d['lift'] * 100:+.1f} pt"
        md.append(f"| {KIND_WORDS.get(k, k)} | {d['n']} | {_pct(d['with_rate'])} | {_pct(d['without_rate'])} | "
                  f"**{lift}** |")
    if ab["cases"]:
        md += ["", "| case | kind | change | with the skill | without |", "|---|---|---|---|---|"]
        for c in ab["cases"]:
            md.append(f"| {c['id']} | {c['kind']} | {c['change']} | {_md(_clip(c['with_answer'], 80))} | "
                      f"{_md(_clip(c['without_answer'], 80))} |")
    else:
        md += ["", "No case's outcome or answer differs."]
    return md


def render_loop_text(loop: list[LoopResult]) -> str:
    passed = sum(r.passed for r in loop)
    ran = sum(r.status != "skipped" for r in loop)
    out = [f"closed loop: {passed}/{ran} passed" + (f" ({len(loop) - ran} skipped)" if ran < len(loop) else "")]
    for r in loop:
        out.append(f"  [{r.status.upper()}] {r.program} ({r.cause})")
        for s in r.steps:
            mark = {True: "ok", False: "FAIL", None: "--"}[s.ok]
            out.append(f"      {s.name:<8} {mark:<4} {s.detail}")
            for ln in s.tail.splitlines()[-8:]:
                out.append(f"               | {ln[:160]}")
    return "\n".join(out)


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[:n - 1] + "…"


def _md(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def render_markdown(score: Score, loop: list[LoopResult] | None = None, command: str = "", kinds: dict | None = None,
                    agentic: list | None = None, ablation: dict | None = None) -> str:
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    md = ["# distdoctor eval results", "",
          f"Generated {now} by `{command or 'python evals/run_evals.py'}`.", "",
          f"Responder: **{_md(score.responder)}** — {score.n} cases.", "",
          "| measure | value |", "|---|---|",
          f"| top-1 (first cause named is the expected one) | **{_pct(score.top1)}** |",
          f"| top-3 (expected cause among the first three) | **{_pct(score.top3)}** |",
          f"| patch named right (cases that have a patch) | {_pct(score.patch_accuracy)} |"]
    if kinds:
        md += _kinds_markdown(kinds)
    md += ["", "## Per cause", "", "| cause | cases | top-1 | top-3 |", "|---|---:|---:|---:|"]
    for cause, d in score.per_cause().items():
        md.append(f"| `{cause}` | {d['n']} | {d['top1_hits']}/{d['n']} ({_pct(d['top1'])}) | "
                  f"{d['top3_hits']}/{d['n']} ({_pct(d['top3'])}) |")
    md += ["", "## Where the cases come from", "", "| origin | cases | top-1 | top-3 |", "|---|---:|---:|---:|"]
    for origin, d in score.per_origin().items():
        md.append(f"| {ORIGIN_WORDS.get(origin, origin)} | {d['n']} | {_pct(d['top1'])} | {_pct(d['top3'])} |")
    tagged: dict[str, list] = {}
    for r in score.results:
        for t in r.tags:
            if t in ("echo-louder", "two-causes", "words-only"):
                tagged.setdefault(t, []).append(r)
    if tagged:
        md += ["", "## Hard cases", "", "| kind | cases | top-1 | top-3 |", "|---|---:|---:|---:|"]
        for t, rs in sorted(tagged.items()):
            md.append(f"| {t} | {len(rs)} | {_pct(sum(r.top1_ok for r in rs) / len(rs))} | "
                      f"{_pct(sum(r.top3_ok for r in rs) / len(rs))} |")
    conf = score.confusions()
    md += ["", "## Confusions (wrong top-1)", ""]
    if conf:
        md += ["| expected | answered | count | cases |", "|---|---|---:|---|"]
        for e, g, n, ids in conf:
            md.append(f"| `{e}` | `{_md(g)}` | {n} | {_md(', '.join(ids))} |")
    else:
        md.append("None: every case's first cause was the expected one.")
    if loop is not None:
        md += ["", "## Closed loop (`--e2e`)", "",
               "Each broken program runs for real under `torchrun --standalone --nproc_per_node=2` (gloo, CPU); "
               "its real log is diagnosed; every patch of the diagnosed cause is applied to a temporary copy; "
               "the copy runs again. Pass = the diagnosis names the cause AND every rank finishes.", "",
               "| program | cause | result | run | diagnose | patch | rerun |", "|---|---|---|---|---|---|---|"]
        for r in loop:
            cells = {s.name: f"{ {True: 'ok', False: 'FAIL', None: '—'}[s.ok]}: {_md(_clip(s.detail, 170))}"
                     for s in r.steps}
            md.append(f"| `{r.program}` | `{r.cause}` | **{r.status}** | " +
                      " | ".join(cells.get(k, "") for k in ("run", "diagnose", "patch", "rerun")) + " |")
    if agentic:
        md += _agentic_markdown(agentic)
    if ablation:
        md += _ablation_markdown(ablation)
    md += ["", "## Every case", "", "| case | origin | expected | answered | top-3 | ok |", "|---|---|---|---|---|---|"]
    for r in score.results:
        got = r.got or f"(none: {r.reason})"
        md.append(f"| {r.id} | {r.origin} | `{r.expected_cause}` | {_md(got)} | {_md(', '.join(r.top3))} | "
                  f"{'✔' if r.top1_ok else ('top-3' if r.top3_ok else '✘')} |")
    return "\n".join(md) + "\n"
