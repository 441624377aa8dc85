"""Render a launch (per-node torchrun commands or an sbatch script) from a profile's front matter.

The profile (profiles/<name>.md) is the single source: its `parameters` are the inputs, its
`render.template` the text, with `{{name}}` placeholders filled from the parameters plus:
`script`, `args` (" a b", shell-quoted), `dashdash_args` (" -- a b", or ""), `node_rank`,
`ifname_env` ("GLOO_SOCKET_IFNAME=eth0 ... " or ""), `ifname_exports` (export lines or ""),
`gpu_directive` ("#SBATCH --gpus-per-node=N" or ""). A template line that is only an empty
placeholder is dropped.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import paths

PLACEHOLDER = re.compile(r"\{\{\s*([a-z_][a-z0-9_]*)\s*\}\}")


class ProfileError(ValueError):
    """A profile that cannot be read or rendered; the message says which file and field."""


@dataclass
class Profile:
    name: str
    path: Path
    front: dict[str, Any]

    @property
    def parameters(self) -> dict[str, dict[str, Any]]:
        return self.front.get("parameters") or {}


@dataclass
class Rendered:
    profile: str
    kind: str  # per_node | script
    commands: list[str] = field(default_factory=list)  # per_node: command for node_rank i
    script: str | None = None  # kind script: the file text

    def text(self) -> str:
        if self.kind == "script":
            return self.script or ""
        lines = []
        for i, cmd in enumerate(self.commands):
            lines.append(f"# node {i}" + (" (hosts the rendezvous)" if i == 0 and len(self.commands) > 1 else ""))
            lines.append(cmd)
        return "\n".join(lines) + "\n"

    def to_json(self) -> str:
        return json.dumps({"profile": self.profile, "kind": self.kind, "commands": self.commands,
                           "script": self.script}, indent=2)


def available_profiles(root: Path = paths.PROFILES) -> list[str]:
    return sorted(p.stem for p in root.glob("*.md"))


def read_front_matter(path: Path) -> dict[str, Any]:
    """The YAML between the leading `---` lines of a profile."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProfileError(f"{path}: no such profile")
    except UnicodeDecodeError as exc:
        raise ProfileError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})")
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise ProfileError(f"{path}:1: missing YAML front matter (file must start with '---')")
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        raise ProfileError(f"{path}:1: front matter has no closing '---'")
    import yaml  # imported here: `launch --help` needs no third-party module

    try:
        data = yaml.safe_load("\n".join(lines[1:end]) + "\n")
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 1
        raise ProfileError(f"{path}:{line}: front matter is not valid YAML: {getattr(exc, 'problem', exc)}")
    if not isinstance(data, dict):
        raise ProfileError(f"{path}:2: front matter is not a mapping")
    return data


def load_profile(name: str, root: Path = paths.PROFILES, validate: bool = True) -> Profile:
    """Load profiles/<name>.md and check its front matter against schemas/profile.schema.json."""
    if not re.fullmatch(r"[a-z][a-z0-9-]*", name):
        raise ProfileError(f"profile name {name!r} is not valid (known: {', '.join(available_profiles(root))})")
    path = root / f"{name}.md"
    if not path.is_file():
        raise ProfileError(f"unknown profile {name!r} (known: {', '.join(available_profiles(root))})")
    front = read_front_matter(path)
    if validate:
        import jsonschema

        schema = json.loads((paths.SCHEMAS / "profile.schema.json").read_text(encoding="utf-8"))
        errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(front), key=lambda e: list(e.path))
        if errors:
            err = errors[0]
            where = "/".join(str(p) for p in err.path) or "(front matter)"
            raise ProfileError(f"{path}: front matter field {where}: {err.message}")
    if front.get("name") != name:
        raise ProfileError(f"{path}: front matter name {front.get('name')!r} differs from the file name {name!r}")
    return Profile(name, path, front)


def resolve_params(profile: Profile, given: dict[str, Any]) -> dict[str, Any]:
    """Defaults from the profile, overridden by `given`; typed; every parameter without default required."""
    out: dict[str, Any] = {}
    unknown = set(given) - set(profile.parameters)
    if unknown:
        raise ProfileError(f"profile {profile.name} has no parameter(s) {', '.join(sorted(unknown))}")
    for name, spec in profile.parameters.items():
        value = given.get(name)
        if value is None:
            value = spec.get("default")
        if value is None:
            out[name] = None
            continue
        if spec["type"] == "int":
            try:
                value = int(value)
            except (TypeError, ValueError):
                raise ProfileError(f"--{name.replace('_', '-')} must be an integer, got {value!r}")
            if value < 0:
                raise ProfileError(f"--{name.replace('_', '-')} must not be negative, got {value}")
        else:
            value = str(value)
            if "\n" in value:
                raise ProfileError(f"--{name.replace('_', '-')} must be one line")
        out[name] = value
    return out


def render(profile: Profile | str, script: str, script_args: list[str] | tuple[str, ...] = (),
           **given: Any) -> Rendered:
    """Fill the profile's template for `script script_args`; per_node templates once per node."""
    if isinstance(profile, str):
        profile = load_profile(profile)
    if not script:
        raise ProfileError("no training script given")
    params = resolve_params(profile, {k: v for k, v in given.items() if v is not None})
    tpl = profile.front["render"]["template"]
    kind = profile.front["render"]["kind"]
    used = set(PLACEHOLDER.findall(tpl))
    missing = sorted(n for n in used if n in params and params[n] is None and n not in ("ifname",))
    if missing:
        raise ProfileError(f"profile {profile.name} needs " + ", ".join(f"--{n.replace('_', '-')}" for n in missing))
    quoted = " ".join(shlex.quote(a) for a in script_args)
    ifvars = profile.front.get("socket_interface_vars") or []
    ifname = params.get("ifname")
    if ifname is not None and not re.fullmatch(r"[A-Za-z0-9_.:@-]{1,32}", ifname):
        raise ProfileError(f"--ifname {ifname!r} is not an interface name")
    values: dict[str, Any] = {
        **{k: ("" if v is None else v) for k, v in params.items()},
        "script": shlex.quote(script),
        "args": f" {quoted}" if quoted else "",
        "dashdash_args": f" -- {quoted}" if quoted else "",
        "ifname_env": "".join(f"{v}={ifname} " for v in ifvars) if ifname else "",
        "ifname_exports": "\n".join(f"export {v}={ifname}" for v in ifvars) if ifname else "",
        "gpu_directive": (f"#SBATCH --gpus-per-node={params['gpus_per_node']}"
                          if params.get("gpus_per_node") else ""),
    }

    def fill(node_rank: int | None) -> str:
        vals = dict(values, node_rank="" if node_rank is None else node_rank)
        out_lines = []
        for line in tpl.splitlines():
            names = PLACEHOLDER.findall(line)
            for n in names:
                if n not in vals:
                    raise ProfileError(f"{profile.path}: template placeholder {{{{{n}}}}} is neither a parameter "
                                       "nor a computed value")
            new = PLACEHOLDER.sub(lambda m: str(vals[m.group(1)]), line)
            if names and not new.strip() and PLACEHOLDER.fullmatch(line.strip()):
                continue  # a line that was only an empty optional placeholder
            out_lines.append(new)
        return "\n".join(out_lines) + ("\n" if tpl.endswith("\n") else "")

    if kind == "per_node":
        nnodes = int(params.get("nnodes") or 1)
        if nnodes < 1:
            raise ProfileError("--nnodes must be at least 1")
        return Rendered(profile.name, kind, commands=[fill(i).strip() for i in range(nnodes)])
    return Rendered(profile.name, kind, script=fill(None))


CLI_HELP = """Render the launch of a training script from a profile (profiles/<name>.md front matter).

  python scripts/launch.py --profile local --nproc-per-node 4 train.py -- --lr 3e-4
  python scripts/launch.py --profile generic-ssh --nnodes 2 --master-addr 10.0.0.1 --ifname eth0 train.py
  python scripts/launch.py --profile slurm --tasks-per-node 2 --python .venv/bin/python train.py -o job.sbatch

Each profile parameter is an option (`--profile NAME --help` lists them). Prints per-node torchrun
commands, or the sbatch script; --json prints {profile, kind, commands, script}.
Exit codes: 0 rendered, 2 usage or profile error.
"""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--profile")
    known, _ = pre.parse_known_args(argv)
    ap = argparse.ArgumentParser(description=CLI_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
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
