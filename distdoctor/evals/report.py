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


def render_text(score: Score, loop: list[LoopResult] | None = None, confusions: int = 15) -> str:
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
    return "\n".join(lines)


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


def render_markdown(score: Score, loop: list[LoopResult] | None = None, command: str = "") -> str:
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    md = ["# distdoctor eval results", "",
          f"Generated {now} by `{command or 'python evals/run_evals.py'}`.", "",
          f"Responder: **{_md(score.responder)}** — {score.n} cases.", "",
          "| measure | value |", "|---|---|",
          f"| top-1 (first cause named is the expected one) | **{_pct(score.top1)}** |",
          f"| top-3 (expected cause among the first three) | **{_pct(score.top3)}** |",
          f"| patch named right (cases that have a patch) | {_pct(score.patch_accuracy)} |", "",
          "## Per cause", "", "| cause | cases | top-1 | top-3 |", "|---|---:|---:|---:|"]
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
    md += ["", "## Every case", "", "| case | origin | expected | answered | top-3 | ok |", "|---|---|---|---|---|---|"]
    for r in score.results:
        got = r.got or f"(none: {r.reason})"
        md.append(f"| {r.id} | {r.origin} | `{r.expected_cause}` | {_md(got)} | {_md(', '.join(r.top3))} | "
                  f"{'✔' if r.top1_ok else ('top-3' if r.top3_ok else '✘')} |")
    return "\n".join(md) + "\n"
