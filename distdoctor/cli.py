"""The `distdoctor` command: one subcommand per tool, each the engine behind its scripts/ file.

`distdoctor diagnose LOG`, `distdoctor patch REPO --dry-run`, ... (also `python -m distdoctor`). The
skill's scripts (scripts/diagnose.py, ...) are thin entry points into the same table (run_script).
Only the standard library is imported here: a tool's module is imported when that tool runs, after
its third-party modules were found, so `--help` works anywhere and a missing package is one line.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass
from typing import Callable, Sequence

EXIT_USAGE = 2
# import name -> the distribution that provides it (what pip / uv install)
DISTRIBUTIONS = {"yaml": "pyyaml", "jsonschema": "jsonschema", "libcst": "libcst", "re2": "google-re2",
                 "hyperscan": "hyperscan", "bm25s": "bm25s", "torch": "torch"}


@dataclass(frozen=True)
class Tool:
    target: str  # "module:function", imported only when the tool runs
    summary: str
    script: str  # its entry point in the skill folder, relative to the skill root
    needs: tuple[str, ...] = ()  # import names it cannot run without
    optional: tuple[str, ...] = ()  # import names it uses when present (installed alongside)
    in_job: bool = False  # runs inside the training job, with the job's own interpreter and torch
    programs: tuple[str, ...] = ()  # distributions that bring an executable it runs (py-spy), not a module

    def distributions(self) -> list[str]:
        return [DISTRIBUTIONS[name] for name in self.needs + self.optional] + list(self.programs)


TOOLS: dict[str, Tool] = {
    "diagnose": Tool("distdoctor.diagnose.cli:main", "first failure and ranked causes from the logs of every rank",
                     "scripts/diagnose.py", ("yaml", "jsonschema", "bm25s"), ("re2", "hyperscan", "libcst")),
    "patch": Tool("distdoctor.patching.cli:main", "apply the libcst patches to a repository: diff, report, write",
                  "scripts/patch_backend.py", ("libcst",)),
    "hang": Tool("distdoctor.hang.cli:main", "why a job hangs: stacks and collectives of every rank",
                 "scripts/hang.py", ("yaml", "jsonschema", "libcst"), programs=("py-spy",)),
    "check": Tool("distdoctor.check.cli:main", "static check of a training repository for distributed hazards",
                  "scripts/check_repo.py", ("yaml", "jsonschema", "libcst")),
    "probe": Tool("distdoctor.probe:main", "launch probe, started by the job's launcher: every rank checks in",
                  "scripts/probe.py", ("torch",), in_job=True),
    "stacks": Tool("distdoctor.stacks:main", "dump the Python stacks of every rank process on this host",
                   "scripts/dump_stacks.py"),
    "launch": Tool("distdoctor.launch:main", "render a launch from a profile: torchrun lines or an sbatch script",
                   "scripts/launch.py", ("yaml", "jsonschema")),
    "evals": Tool("distdoctor.evals.cli:main", "score a responder (built-in, an agent, answers) on the eval cases",
                  "evals/run_evals.py", ("yaml", "jsonschema")),
    "validate": Tool("distdoctor.validate_cli:main", "validate the knowledge base: references, profiles, SKILL.md",
                     "scripts/validate_kb.py", ("yaml", "jsonschema")),
}


class Unavailable(Exception):
    """The tool's module is not part of this version of distdoctor."""


def _wants_help(argv: Sequence[str]) -> bool:
    return any(a in ("-h", "--help") for a in argv)


def missing_modules(tool: Tool) -> list[str]:
    return [name for name in tool.needs if importlib.util.find_spec(name) is None]


def missing_message(prog: str, tool: Tool, missing: list[str], script: str | None = None) -> str:
    """One line: what is missing and the command that installs it (`script`: the path it was run as)."""
    what = ", ".join(f"{DISTRIBUTIONS.get(m, m)} (import {m})" for m in missing)
    if tool.in_job:
        return (f"{prog}: missing {what}; run it with the training job's own Python, the one that has torch "
                f"(torchrun {script or tool.script} ...)")
    names = tool.distributions() + [DISTRIBUTIONS.get(m, m) for m in missing]
    install = f"{sys.executable} -m pip install {' '.join(dict.fromkeys(names))}"
    if script:
        return f"{prog}: missing {what}; run it as `uv run {script} ...` or install them: {install}"
    return f"{prog}: missing {what}; install them: {install}"


def load(tool: Tool) -> Callable[[list[str]], int]:
    """The tool's entry function; Unavailable when its module is not in this version."""
    module_name, _, function = tool.target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        parts = module_name.split(".")
        if exc.name in {".".join(parts[:i]) for i in range(2, len(parts) + 1)}:
            raise Unavailable(module_name) from exc
        raise
    return getattr(module, function)


def run_tool(name: str, argv: Sequence[str], prog: str, script: str | None = None) -> int:
    tool = TOOLS[name]
    argv = list(argv)
    if not _wants_help(argv):
        missing = missing_modules(tool)
        if missing:
            print(missing_message(prog, tool, missing, script), file=sys.stderr)
            return EXIT_USAGE
    saved = sys.argv[0]
    try:
        entry = load(tool)
        sys.argv[0] = prog  # argparse's default prog
        return entry(argv)
    except Unavailable as exc:
        print(f"{prog}: not available in this version of distdoctor (no module {exc})", file=sys.stderr)
        return EXIT_USAGE
    except ModuleNotFoundError as exc:  # one the table does not list, or needed by --help (launch --profile X --help)
        top = (exc.name or "").partition(".")[0]
        if not top or top == "distdoctor":
            raise
        print(missing_message(prog, tool, [top], script), file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # the reader left early (`| head`): stop quietly, as command-line tools do
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    finally:
        sys.argv[0] = saved


EXIT_BROKEN_PIPE = 128 + 13  # what a shell reports for a process killed by SIGPIPE


def quiet_on_broken_pipe(main) -> int:
    """`main()`'s exit code; when its reader left early (`| head`), stop quietly with EXIT_BROKEN_PIPE as
    command-line tools do (the evals' modules run with `python -m` use this)."""
    try:
        return main()
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's flush at exit does not fail on the closed pipe again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def run_script(name: str) -> int:
    """Entry of a skill script (scripts/<file>.py): the tool, named as the script, with the script's arguments."""
    return run_tool(name, sys.argv[1:], TOOLS[name].script.rsplit("/", 1)[-1], script=sys.argv[0])


def usage() -> str:
    from distdoctor import __version__

    width = max(map(len, TOOLS))
    rows = "\n".join(f"  {name:<{width}}  {tool.summary}" for name, tool in TOOLS.items())
    return (f"usage: distdoctor COMMAND [ARGS...]   (distdoctor COMMAND --help for its options)\n\n"
            f"Diagnose and fix distributed PyTorch training (distdoctor {__version__}).\n\ncommands:\n{rows}\n")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        sys.stdout.write(usage())
        return 0 if argv else EXIT_USAGE
    if argv[0] == "--version":
        from distdoctor import __version__

        print(f"distdoctor {__version__}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in TOOLS:
        print(f"distdoctor: unknown command {name!r} (commands: {', '.join(TOOLS)})", file=sys.stderr)
        return EXIT_USAGE
    return run_tool(name, rest, f"distdoctor {name}")
