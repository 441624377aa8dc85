"""Command line of scripts/diagnose.py."""

from __future__ import annotations

import argparse
import json
import sys
import time

EPILOG = """exit codes: 0 a cause was found, 1 none found, 2 input errors (a path that is missing or
unreadable, a binary file, a bad knowledge base). Files inside folders that cannot be read are
reported and skipped."""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="diagnose.py", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Find the first failure in distributed PyTorch logs and name its cause from the knowledge "
                    "base (references/). LOG: a file, a folder of per-rank logs (torchrun --log-dir, "
                    "rank_N.log), '-' for standard input; plain, .gz, .bz2 or .xz; any size.")
    ap.add_argument("logs", nargs="*", metavar="LOG")
    ap.add_argument("--context", help="what you ran or saw, in your words (extra evidence)")
    ap.add_argument("--json", action="store_true", help="print the machine-readable result")
    ap.add_argument("--references", help="knowledge base folder (default: the project's references/)")
    ap.add_argument("--quiet", action="store_true", help="no progress on standard error")
    ap.add_argument("--repo", action="append", metavar="PATH",
                    help="the job's code (a folder or a .py file; may repeat): the static checker's findings there "
                         "are weighed with the log (pass it for a timeout, hang or peer-died log when the code is "
                         "at hand); nothing is imported")
    args = ap.parse_args(argv)
    if not args.logs and not args.context:
        ap.print_usage(sys.stderr)
        print("diagnose.py: error: give at least one LOG (or '-' for standard input) or --context", file=sys.stderr)
        return 2
    # the engine (pyyaml, jsonschema) is imported only now: --help needs no third-party module
    from distdoctor.diagnose.engine import diagnose_paths
    from distdoctor.diagnose.render import render
    from distdoctor.knowledge import KnowledgeError

    code = None
    if args.repo:
        from distdoctor.diagnose import code_evidence

        try:
            import libcst  # noqa: F401  (the checker's parser)
            code = code_evidence.check(code_evidence.validate(args.repo), quiet=args.quiet)
        except code_evidence.RepoError as exc:
            print(f"diagnose.py: error: {exc}", file=sys.stderr)
            return 2
        except ImportError:
            print("diagnose.py: error: --repo needs libcst (pip install libcst)", file=sys.stderr)
            return 2
        for err in code["errors"]:
            print(f"diagnose.py: --repo: {err}", file=sys.stderr)
    last = [time.monotonic()]

    def progress(files: int, stats) -> None:
        now = time.monotonic()
        if not args.quiet and now - last[0] > 2:
            last[0] = now
            print(f"diagnose: {files} file(s), {stats.bytes / 1e6:.0f} MB read", file=sys.stderr)

    try:
        result = diagnose_paths(args.logs, args.context, args.references, progress, code)
    except KnowledgeError as exc:
        print(f"diagnose.py: knowledge base: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    for err in result["errors"]:
        print(f"diagnose.py: {err['error']}", file=sys.stderr)
    from distdoctor.diagnose.code_link import checker_findings

    result["checker"] = checker_findings(result)  # the static checker's findings on the failing code lines
    if args.json:
        out = dict(result)
        out.pop("input_error", None)
        print(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(render(result))
    if result.get("input_error"):
        return 2
    return 0 if result["causes"] else 1


if __name__ == "__main__":
    sys.exit(main())
