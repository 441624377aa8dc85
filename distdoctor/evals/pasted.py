"""Does a log read the same however it was pasted or saved? Each labelled real log of tests/data/logs is changed
the ways people change logs (quoted in an issue, indented as a code block, copied from a web page, scraped from
HTML, typed outside a forum's code block, saved by Windows PowerShell) and diagnosed; the plain file's answer is
the reference.

    python -m distdoctor.evals.pasted [--json] [--only quote,html]
"""

from __future__ import annotations

import argparse
import html
import json
import sys
import tempfile
from pathlib import Path
from typing import Callable

import yaml

from distdoctor import paths

LOGS = paths.ROOT / "tests" / "data" / "logs"
MAX_BYTES = 300_000  # the short logs; the large ones say nothing more about pasting


def quote(text: str) -> str:
    """GitHub's and e-mail's quote: "> " before every line (a blank line keeps ">" alone)."""
    return "\n".join(("> " + line).rstrip() for line in text.split("\n"))  # "\n" only: a "\r" redraw stays in its line


def indent(text: str) -> str:
    """A markdown code block by indentation."""
    return "\n".join("    " + line for line in text.split("\n"))


def nbsp(text: str) -> str:
    """A web page's copy: every space a non-breaking one."""
    return text.replace(" ", "\u00a0")


def typographer(text: str) -> str:
    """A forum's typographer outside a code block: curly quotes, "--" as an en dash."""
    out, opened = [], False
    for ch in text.replace("--", "\u2013"):
        if ch == '"':
            out.append("\u201d" if opened else "\u201c")
            opened = not opened
        else:
            out.append("\u2019" if ch == "'" else ch)
    return "".join(out)


PASTES: dict[str, Callable[[str], str]] = {"quote": quote, "indent": indent, "nbsp": nbsp, "html": html.escape,
                                           "typographer": typographer}
ENCODINGS = {"utf16": "utf-16"}  # saved, not pasted: the same text in another encoding


def answer(result: dict) -> tuple:
    """What must not change: the first three causes, the verdict, the first failure's rank and line."""
    first = result.get("first_failure") or {}
    return (tuple(c["id"] for c in result["causes"][:3]), result.get("verdict"), first.get("rank"), first.get("line"))


def labelled_logs() -> list[tuple[Path, dict]]:
    """(log, meta) of every short labelled log of tests/data/logs."""
    out = []
    for meta_path in sorted(LOGS.glob("*.meta.yaml")):
        log = meta_path.with_name(meta_path.name[:-len(".meta.yaml")] + ".log")
        meta = yaml.safe_load(meta_path.read_text()) or {}
        if log.is_file() and log.stat().st_size <= MAX_BYTES and meta.get("expected_cause"):
            out.append((log, meta))
    return out


def measure(kinds: list[str], progress: Callable[[int, int], None] | None = None) -> dict:
    """Per kind of change: logs whose answer stayed the same, and causes / first ranks right before and after."""
    from distdoctor.diagnose import diagnose_paths

    logs = labelled_logs()
    rows = {k: {"same": 0, "cause_right": 0, "rank_right": 0, "changed": []} for k in kinds}
    base_cause = base_rank = ranked = 0
    with tempfile.TemporaryDirectory(prefix="distdoctor-pasted-") as tmp:
        for i, (log, meta) in enumerate(logs):
            plain = answer(diagnose_paths([str(log)]))
            base_cause += plain[0][:1] == (meta["expected_cause"],)
            has_rank = meta.get("first_failure_rank") is not None
            ranked += has_rank
            base_rank += has_rank and plain[2] == meta["first_failure_rank"]
            text = log.read_bytes().decode("utf-8", "replace")  # "\r" kept (read_text would make it a newline)
            for kind in kinds:
                path = Path(tmp) / f"{kind}-{log.name}"
                if kind in ENCODINGS:
                    path.write_bytes(text.encode(ENCODINGS[kind]))
                else:
                    path.write_text(PASTES[kind](text), encoding="utf-8")
                got = answer(diagnose_paths([str(path)]))
                row = rows[kind]
                row["same"] += got == plain
                row["cause_right"] += got[0][:1] == (meta["expected_cause"],)
                row["rank_right"] += has_rank and got[2] == meta["first_failure_rank"]
                if got != plain:
                    row["changed"].append(log.name)
            if progress:
                progress(i + 1, len(logs))
    return {"logs": len(logs), "plain_cause_right": base_cause, "with_rank": ranked, "plain_rank_right": base_rank,
            "kinds": rows}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m distdoctor.evals.pasted", description=__doc__.split("\n\n")[0])
    p.add_argument("--only", metavar="KINDS", help=f"comma-separated kinds (default all: "
                                                   f"{','.join([*PASTES, *ENCODINGS])})")
    p.add_argument("--json", action="store_true", help="print the JSON object")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    args = p.parse_args(argv)
    kinds = args.only.split(",") if args.only else [*PASTES, *ENCODINGS]
    unknown = [k for k in kinds if k not in PASTES and k not in ENCODINGS]
    if unknown:
        p.error(f"--only: unknown kind(s) {', '.join(unknown)}")

    def progress(done: int, total: int) -> None:
        if not args.quiet and (done % 20 == 0 or done == total):
            print(f"pasted: {done}/{total} logs", file=sys.stderr)

    out = measure(kinds, progress)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{out['logs']} labelled logs; plain: cause right {out['plain_cause_right']}, "
          f"first rank right {out['plain_rank_right']}/{out['with_rank']}")
    for kind, row in out["kinds"].items():
        print(f"  {kind:12} same answer {row['same']}/{out['logs']}  cause right {row['cause_right']}  "
              f"first rank right {row['rank_right']}/{out['with_rank']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
