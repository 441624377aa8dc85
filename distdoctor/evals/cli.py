"""`python evals/run_evals.py`: score a responder on every case, write RESULTS.md, optionally run the closed loop.

Exit status: 0 ok; 1 top-1 below --min-top1 or a closed-loop program failed; 2 bad input or usage.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path

from distdoctor import paths

DEFAULT_CASES = paths.ROOT / "evals" / "cases.jsonl"
DEFAULT_RESULTS = paths.ROOT / "evals" / "RESULTS.md"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="run_evals.py",
        description="Score a responder (the built-in diagnosis, an external agent, or recorded answers) on "
                    "distdoctor's eval cases: per-cause accuracy, top-1/top-3, confusions; writes RESULTS.md.",
        epilog="An agent gets the case as JSON on stdin ({id, log, context} and, for torchrun --log-dir cases, files: {relative path: text}; never the expected answer) and "
               "DISTDOCTOR_SKILL=<path of SKILL.md> in its environment; it answers with a JSON object "
               '{"cause": ID, "patch": ID-or-null, "causes": [ranked ids]} or a last line "CAUSE: <id>". '
               "An agentic case (evals/agentic/*.yaml) runs in a fresh workspace (cwd) and gets {id, kind, words, "
               "workspace, repo?, logs?, job: {pid, command, log}?, run: {command}?, causes, answer}; it may add "
               '"first_failure_rank", "odd_ranks" and "location": {"file", "line"} to its answer. '
               "Exit: 0 ok, 1 below --min-top1 or a closed-loop failure, 2 bad input.")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--agent-cmd", metavar="CMD", help="external agent command, split with shlex (no shell), "
                                                         "run once per case")
    src.add_argument("--agent", choices=("claude", "codex", "gemini", "opencode"),
                     help="a real agent CLI, headless, in a fresh workspace per case with the skill installed where "
                          "that CLI looks for it (see distdoctor/evals/agents.py)")
    src.add_argument("--responses", metavar="FILE.jsonl", help="recorded answers: {id, cause, patch?, causes?} "
                                                               "or {id, output} per line")
    p.add_argument("--cases", metavar="FILE", default=str(DEFAULT_CASES), help="case file (JSONL, "
                   "schemas/case.schema.json); default evals/cases.jsonl")
    p.add_argument("-j", "--jobs", type=int, default=1, metavar="N", help="cases answered in parallel (default 1)")
    p.add_argument("--timeout", type=float, default=120.0, metavar="S", help="per-case agent timeout in seconds")
    p.add_argument("--json", action="store_true", help="print a JSON object (top1, top3, per_cause, cases...) "
                                                       "on stdout; the table goes to stderr")
    p.add_argument("--results", metavar="FILE", default=str(DEFAULT_RESULTS),
                   help="where to write the markdown report (default evals/RESULTS.md)")
    p.add_argument("--no-results", action="store_true", help="do not write the markdown report")
    p.add_argument("--min-top1", type=float, metavar="X", help="exit 1 when top-1 is below X (a fraction 0-1)")
    p.add_argument("--e2e", action="store_true", help="also run the closed loop of evals/e2e.yaml "
                                                      "(real torchrun, 2 gloo ranks)")
    p.add_argument("--e2e-manifest", metavar="FILE", default=None, help=argparse.SUPPRESS)
    p.add_argument("--agentic", action="store_true", help="also run the agentic cases of evals/agentic/ (large "
                   "logs, live hangs, fixes); implied by --e2e and --ablate-skill")
    p.add_argument("--agentic-dir", metavar="DIR", default=None, help="agentic case folder or file "
                   "(default evals/agentic)")
    p.add_argument("--no-loop", action="store_true", help="with --e2e: leave out the closed loop of evals/e2e.yaml")
    p.add_argument("--hang-only", action="store_true", help="with --e2e: of the closed loop only the live-hang "
                   "cases, one job at a time (for a small machine), and no agentic case unless --agentic")
    p.add_argument("--kind", action="append", choices=("short_log", "words", "large_log", "hang", "fix"),
                   help="only cases of this kind (repeatable)")
    p.add_argument("--ablate-skill", action="store_true", help="with --agent-cmd or --agent: run every case twice, "
                   "with the skill available (installed in the workspace, DISTDOCTOR_SKILL set) and absent, and "
                   "report the lift per kind and the cases that differ")
    p.add_argument("--agent-bin", metavar="PATH", help="with --agent: the CLI executable (default: its name on PATH)")
    p.add_argument("--cause", action="append", metavar="ID", help="score only cases expecting this cause "
                                                                  "(repeatable)")
    p.add_argument("--no-corpus", action="store_true", help="skip the real-log corpus (evals/corpus/ and the public "
                                                            "logs), scored with the built-in diagnosis on the "
                                                            "default cases")
    p.add_argument("--corpus", metavar="DIR", help="real-log corpus folder (default evals/corpus/); its train split "
                                                   "is also what retrieval indexes")
    p.add_argument("--train-only", action="store_true", help="score the real-log corpus's train split only: "
                   "held-out files are never read (for development); implies --no-results")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from distdoctor.evals.cases import CaseError, load_cases
    from distdoctor.evals import report, responders, scoring

    if args.jobs < 1:
        return _fail("-j must be at least 1")
    if args.timeout <= 0:
        return _fail("--timeout must be positive")
    if args.agent_cmd is not None and not args.agent_cmd.strip():
        return _fail("--agent-cmd is empty")
    if args.ablate_skill and args.agent_cmd is None and args.agent is None:
        return _fail("--ablate-skill needs --agent-cmd or --agent (the built-in tools have no skill to take away)")
    if args.agent_bin and args.agent is None:
        return _fail("--agent-bin needs --agent")
    if args.train_only and args.no_corpus:
        return _fail("--train-only scores the corpus's train split: it cannot go with --no-corpus")
    if args.train_only:
        args.no_results = True  # RESULTS.md reports both splits
    if args.min_top1 is not None and not 0 <= args.min_top1 <= 1:
        return _fail(f"--min-top1 {args.min_top1} is not a fraction between 0 and 1")
    causes = _causes()
    try:
        cases = load_cases(args.cases, causes)
    except CaseError as exc:
        return _fail(str(exc))
    if args.cause:
        unknown = [c for c in args.cause if causes is not None and c not in causes]
        if unknown:
            return _fail(f"--cause {unknown[0]!r} is not a cause id of taxonomy.yaml")
        cases = [c for c in cases if c.expected_cause in args.cause]
        if not cases:
            return _fail(f"no case expects {', '.join(args.cause)}")
    if args.kind:
        cases = [c for c in cases if ("short_log" if c.log.strip() else "words") in args.kind]
    agentic_cases = None
    if args.agentic or args.e2e and not args.hang_only or args.ablate_skill or args.agentic_dir:
        from distdoctor.evals import agentic

        try:
            agentic_cases = agentic.load_cases(args.agentic_dir or agentic.AGENTIC_DIR, causes)
        except agentic.AgenticError as exc:
            return _fail(str(exc))
        if args.kind:
            agentic_cases = [c for c in agentic_cases if c.kind in args.kind]
        if args.cause:
            agentic_cases = [c for c in agentic_cases if set(c.causes) & set(args.cause)]
    try:
        if args.agent is not None:
            from distdoctor.evals.agents import PresetResponder

            responder = PresetResponder(args.agent, args.agent_bin, timeout=args.timeout)
        elif args.agent_cmd is not None:
            responder = responders.AgentResponder(args.agent_cmd, timeout=args.timeout,
                                                  skill_layout="generic" if args.ablate_skill else None)
        elif args.responses:
            responder = responders.RecordedResponder(args.responses)
        else:
            responder = responders.BuiltinResponder()
    except CaseError as exc:
        return _fail(str(exc))
    except (ValueError, ImportError) as exc:
        return _fail(f"cannot set up the responder: {exc}")

    result = scoring.score(cases, responder, jobs=args.jobs, causes=causes, progress=not args.quiet)
    agentic_results = ablation = None
    if agentic_cases is not None:
        agentic_results = _run_agentic(agentic_cases, responder, args)
    if args.ablate_skill:
        ablation = _ablate(cases, agentic_cases, responder, result, agentic_results, args, causes)
    from distdoctor.evals.ablation import by_kind

    kinds = by_kind(result, agentic_results)
    loop = None
    if args.e2e and args.hang_only and not args.no_loop:
        from distdoctor.evals import hang_cases

        loop = hang_cases.run_all(progress=not args.quiet, together=False)
    elif args.e2e and not args.no_loop:
        from distdoctor.evals import e2e

        try:
            loop = e2e.run_loop(Path(args.e2e_manifest) if args.e2e_manifest else e2e.MANIFEST,
                                progress=not args.quiet)
        except e2e.ManifestError as exc:
            return _fail(str(exc))

    text = report.render_text(result, loop, kinds=kinds, agentic=agentic_results, ablation=ablation)
    corpus_md = corpus_json = None
    if not args.no_corpus and isinstance(responder, responders.BuiltinResponder) and not args.cause \
            and Path(args.cases).resolve() == DEFAULT_CASES.resolve():
        from distdoctor.diagnose.retrieval import use_corpus
        from distdoctor.evals import corpus

        refused: list[str] = []
        use_corpus(args.corpus)
        try:
            scored = corpus.score_corpus(Path(args.corpus) if args.corpus else corpus.CORPUS, causes=causes,
                                         errors=refused, train_only=args.train_only)
        finally:
            use_corpus(None)  # a later diagnosis in this process indexes evals/corpus/ again
        corpus_md = corpus.render_markdown(scored, refused)
        corpus_json = corpus.to_json(scored, refused)
        text += "\n\n" + corpus.render_text(scored)
    if args.json:
        print(text, file=sys.stderr)
        out = result.to_json()
        out["kinds"] = kinds
        if loop is not None:
            out["e2e"] = [r.to_json() for r in loop]
        if corpus_json is not None:
            out["corpus"] = corpus_json
        if agentic_results is not None:
            out["agentic"] = [r.to_json() for r in agentic_results]
        if ablation is not None:
            out["ablation"] = ablation
        print(json.dumps(out, indent=1))
    else:
        print(text)
    if not args.no_results:
        command = "python evals/run_evals.py " + " ".join(shlex.quote(a) for a in (argv if argv is not None
                                                                                    else sys.argv[1:]))
        try:
            md = report.render_markdown(result, loop, command.strip(), kinds=kinds, agentic=agentic_results,
                                        ablation=ablation)
            _write_atomic(Path(args.results), md + ("\n" + corpus_md if corpus_md else ""))
        except OSError as exc:
            return _fail(f"cannot write {args.results}: {exc.strerror or exc}")
        if not args.quiet:
            print(f"[evals] wrote {args.results}", file=sys.stderr)

    status = 0
    if args.min_top1 is not None and result.top1 < args.min_top1:
        print(f"run_evals: top-1 {result.top1:.3f} is below --min-top1 {args.min_top1}", file=sys.stderr)
        status = 1
    if loop is not None and any(r.status == "failed" for r in loop):
        print("run_evals: closed loop failed for " + ", ".join(r.program for r in loop if r.status == "failed"),
              file=sys.stderr)
        status = 1
    return status


def _run_agentic(cases, responder, args, with_skill: bool = True) -> list:
    """The agentic cases, answered by the built-in tools (no skill to install) or by the agent."""
    from distdoctor.evals import agentic

    from distdoctor.evals.responders import BuiltinResponder

    if isinstance(responder, BuiltinResponder):
        responder = agentic.BuiltinTools()
    elif not hasattr(responder, "respond"):  # recorded answers cannot work in a workspace
        return [agentic.AgenticResult(c.id, c.kind, "skipped", {}, {}, "recorded answers cannot work in a "
                                      "workspace", None, 0.0, [c.kind]) for c in cases]
    layout = getattr(responder, "skill_layout", None) or ("generic" if hasattr(responder, "argv") else None)
    return agentic.run_all(cases, responder, layout if with_skill else None, progress=not args.quiet, jobs=args.jobs)


def _ablate(cases, agentic_cases, responder, with_score, with_agentic, args, causes) -> dict:
    """Run everything again with the skill absent; compare per kind and per case."""
    from distdoctor.evals import ablation, scoring

    import copy

    responder.with_skill = True
    absent = copy.copy(responder)
    absent.with_skill = False
    if not args.quiet:
        print("[evals] again, without the skill", file=sys.stderr, flush=True)
    without_score = scoring.score(cases, absent, jobs=args.jobs, causes=causes, progress=not args.quiet)
    without_agentic = _run_agentic(agentic_cases or [], absent, args, with_skill=False)
    out = ablation.compare(ablation.outcomes(with_score, with_agentic), ablation.outcomes(without_score, without_agentic))
    out["responder"] = responder.name
    out["without"] = {"kinds": ablation.by_kind(without_score, without_agentic)}
    return out


def _causes() -> set[str] | None:
    from distdoctor.knowledge import KnowledgeError, load_taxonomy

    try:
        return set(load_taxonomy())
    except (KnowledgeError, OSError):
        return None


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _fail(msg: str) -> int:
    print(f"run_evals: error: {msg}", file=sys.stderr)
    return 2
