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
               "Exit: 0 ok, 1 below --min-top1 or a closed-loop failure, 2 bad input.")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--agent-cmd", metavar="CMD", help="external agent command, split with shlex (no shell), "
                                                         "run once per case")
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
    p.add_argument("--cause", action="append", metavar="ID", help="score only cases expecting this cause "
                                                                  "(repeatable)")
    p.add_argument("--no-corpus", action="store_true", help="skip the real-log corpus (evals/corpus/ and the public "
                                                            "logs), scored with the built-in diagnosis on the "
                                                            "default cases")
    p.add_argument("--corpus", metavar="DIR", help="real-log corpus folder (default evals/corpus/); its train split "
                                                   "is also what retrieval indexes")
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
    try:
        if args.agent_cmd is not None:
            responder = responders.AgentResponder(args.agent_cmd, timeout=args.timeout)
        elif args.responses:
            responder = responders.RecordedResponder(args.responses)
        else:
            responder = responders.BuiltinResponder()
    except CaseError as exc:
        return _fail(str(exc))
    except (ValueError, ImportError) as exc:
        return _fail(f"cannot set up the responder: {exc}")

    result = scoring.score(cases, responder, jobs=args.jobs, causes=causes, progress=not args.quiet)
    loop = None
    if args.e2e:
        from distdoctor.evals import e2e

        try:
            loop = e2e.run_loop(Path(args.e2e_manifest) if args.e2e_manifest else e2e.MANIFEST,
                                progress=not args.quiet)
        except e2e.ManifestError as exc:
            return _fail(str(exc))

    text = report.render_text(result, loop)
    corpus_md = corpus_json = None
    if not args.no_corpus and isinstance(responder, responders.BuiltinResponder) and not args.cause \
            and Path(args.cases).resolve() == DEFAULT_CASES.resolve():
        from distdoctor.diagnose.retrieval import use_corpus
        from distdoctor.evals import corpus

        refused: list[str] = []
        use_corpus(args.corpus)
        scored = corpus.score_corpus(Path(args.corpus) if args.corpus else corpus.CORPUS, causes=causes,
                                     errors=refused)
        corpus_md = corpus.render_markdown(scored, refused)
        corpus_json = corpus.to_json(scored, refused)
        text += "\n\n" + corpus.render_text(scored)
    if args.json:
        print(text, file=sys.stderr)
        out = result.to_json()
        if loop is not None:
            out["e2e"] = [r.to_json() for r in loop]
        if corpus_json is not None:
            out["corpus"] = corpus_json
        print(json.dumps(out, indent=1))
    else:
        print(text)
    if not args.no_results:
        command = "python evals/run_evals.py " + " ".join(shlex.quote(a) for a in (argv if argv is not None
                                                                                    else sys.argv[1:]))
        try:
            md = report.render_markdown(result, loop, command.strip())
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
