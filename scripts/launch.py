#!/usr/bin/env python3
"""Render the launch of a training script from a profile (profiles/<name>.md front matter).

  python scripts/launch.py --profile local --nproc-per-node 4 train.py -- --lr 3e-4
  python scripts/launch.py --profile generic-ssh --nnodes 2 --master-addr 10.0.0.1 --ifname eth0 train.py
  python scripts/launch.py --profile slurm --tasks-per-node 2 --python .venv/bin/python train.py -o job.sbatch

Each profile parameter is an option (`--profile NAME --help` lists them). Prints per-node torchrun
commands, or the sbatch script; --json prints {profile, kind, commands, script}.
Exit codes: 0 rendered, 2 usage or profile error.
"""
import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from distdoctor.launch import ProfileError, available_profiles, load_profile, render  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--profile")
    known, _ = pre.parse_known_args(argv)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", required=True, help=f"one of: {', '.join(available_profiles())}")
    ap.add_argument("--json", action="store_true", help="print JSON instead of text")
    ap.add_argument("-o", "--output", help="write to this file (atomically) instead of stdout")
    profile = None
    if known.profile:
        try:
            profile = load_profile(known.profile)
        except ProfileError as exc:
            print(f"launch: {exc}", file=sys.stderr)
            return 2
        group = ap.add_argument_group(f"parameters of profile {profile.name}")
        for name, spec in profile.parameters.items():
            default = spec.get("default")
            group.add_argument(f"--{name.replace('_', '-')}", dest=name, metavar=spec["type"].upper(),
                               help=f"{spec['help']} (default: {default})".replace('%', '%%'))
    ap.add_argument("script", help="training script")
    ap.add_argument("script_args", nargs=argparse.REMAINDER, help="arguments of the script (after an optional --)")
    args = ap.parse_args(argv)
    script_args = list(args.script_args)
    if script_args[:1] == ["--"]:
        script_args = script_args[1:]
    given = {name: getattr(args, name) for name in profile.parameters}
    try:
        out = render(profile, args.script, script_args, **given)
    except ProfileError as exc:
        print(f"launch: {exc}", file=sys.stderr)
        return 2
    text = out.to_json() + "\n" if args.json else out.text()
    if args.output:
        target = Path(args.output)
        tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
        try:
            tmp.write_text(text, encoding="utf-8")
            if out.kind == "script":
                tmp.chmod(0o755)
            os.replace(tmp, target)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            print(f"launch: cannot write {target}: {exc.strerror}", file=sys.stderr)
            return 2
        print(f"launch: wrote {target}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
