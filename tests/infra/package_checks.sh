#!/usr/bin/env bash
# Packaging checks on a fresh machine (called by .ci/run; about 3 minutes; needs PyPI and npm):
#   1. the Agent Skills validator (skills-ref: `agentskills validate`) on a copy named distdoctor
#   2. wheel + sdist (the wheel built from the sdist) installed in a clean venv WITHOUT torch and run from
#      another folder; `pipx install` and `uvx --from` of the checkout
#   3. a torch-only venv: the skill's scripts through `uv run` (and without uv: one line, exit 2), the probe
#      under torchrun with the job's interpreter; the skill folder must be left byte-for-byte unchanged
#   4. `claude plugin validate --strict` of the plugin and the marketplace, and the plugin installed from the
#      marketplace lists the root skill and the slash commands
# Works on copies of the tracked and untracked-but-not-ignored files; writes only under a temporary folder
# (and the usual pip/uv/npm caches).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
PY=${PYTHON:-python3}
WORK=$(mktemp -d /tmp/distdoctor-pkg.XXXXXX)
START=$SECONDS
TORCH_PID=
TORCHENV=${XDG_CACHE_HOME:-$HOME/.cache}/distdoctor/torch-2.13.0-only-venv
torch_only() { "$TORCHENV/bin/python" -c "import torch" 2>/dev/null && ! "$TORCHENV/bin/python" -c "import yaml" 2>/dev/null; }
cleanup() {  # a venv still being built when a check failed: let pip finish, keep it only if it is right
  if [ -n "$TORCH_PID" ]; then wait "$TORCH_PID" 2>/dev/null || true; torch_only || rm -rf "$TORCHENV"; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
step() { printf '\n[package] +%ss %s\n' "$((SECONDS - START))" "$*"; }
fail() { printf '\n[package] FAILED: %s\n' "$*" >&2; exit 1; }
trap 'rc=$?; [ $rc -eq 0 ] || printf "\n[package] FAILED (exit %s) at line %s: %s\n" "$rc" "$LINENO" "$BASH_COMMAND" >&2' ERR
# expect PATTERN CMD...: CMD must exit 0 and print a line matching PATTERN (extended regex); both shown if not
expect() {
  local pattern=$1 rc=0; shift
  "$@" >"$WORK/out" 2>"$WORK/err" || rc=$?
  if [ "$rc" != 0 ] || ! grep -qE -- "$pattern" "$WORK/out"; then
    cat "$WORK/out" "$WORK/err" >&2; fail "$* (exit $rc; wanted a line matching '$pattern')"
  fi
}
quiet_pip() { "$@" 2>&1 | { grep -v '^WARNING: Location' || true; }; }
LOG_NAME=field_nanogpt_dynamo_py312.log   # a real log (tests/data/logs), its cause: compile_toolchain

# The torch-only venv (torch==2.13.0 and what it depends on, nothing else) is kept between runs: it is
# the largest thing here to build and to delete. Rebuilt when it cannot import torch, or can import pyyaml.
step "the torch-only venv $TORCHENV, built in the background meanwhile if needed"
if ! torch_only; then
  rm -rf "$TORCHENV"
  ("$PY" -m venv "$TORCHENV" && "$TORCHENV/bin/pip" install -q torch==2.13.0) >"$WORK/torchenv.log" 2>&1 &
  TORCH_PID=$!
fi

step "copies of the checkout (git ls-files): the skill folder $WORK/skill/distdoctor, and $WORK/src to build from"
mkdir -p "$WORK/skill/distdoctor" "$WORK/src" "$WORK/elsewhere"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  [ -e "$f" ] && printf '%s\0' "$f"; done >"$WORK/files"
xargs -0 cp --parents -t "$WORK/skill/distdoctor" <"$WORK/files"
xargs -0 cp --parents -t "$WORK/src" <"$WORK/files"   # building writes build/ and *.egg-info into its source
SKILL="$WORK/skill/distdoctor"
SRC="$WORK/src"
cp "tests/data/logs/$LOG_NAME" "$WORK/elsewhere/job.log"
LOG="$WORK/elsewhere/job.log"
snapshot() { (cd "$SKILL" && find . -printf '%p %s %T@ %m\n' | sort); }
snapshot >"$WORK/skill.before"

step "tools: uv, pipx, skills-ref, build (PyPI); claude (npm)"
"$PY" -m venv "$WORK/tools"
TOOLS="$WORK/tools/bin"
quiet_pip "$TOOLS/pip" install -q uv
"$TOOLS/uv" pip install --quiet --python "$TOOLS/python" pipx skills-ref build
if ! command -v claude >/dev/null; then
  npm install -q --prefix "$WORK/npm" @anthropic-ai/claude-code >"$WORK/npm.log" 2>&1 \
    || { cat "$WORK/npm.log"; fail "npm install @anthropic-ai/claude-code"; }
  export PATH="$WORK/npm/node_modules/.bin:$PATH"
fi
export UV_PYTHON_DOWNLOADS=never   # uv uses the interpreters that are here, never downloads one

step "1. agentskills validate (folder named distdoctor)"
"$TOOLS/agentskills" validate "$SKILL"

step "2. wheel and sdist; the wheel installed without torch, run from another folder"
"$TOOLS/pyproject-build" --installer uv --outdir "$WORK/dist" "$SRC" >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; fail "build"; }
if grep -iE "deprecat|SetuptoolsWarning|license.*(table|classifier)" "$WORK/build.log"; then fail "the build warns"; fi
WHEEL=$(ls "$WORK"/dist/*.whl)
"$PY" - "$WHEEL" <<'EOF'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
info = "-".join(sys.argv[1].rsplit("/", 1)[-1].split("-")[:2]) + ".dist-info"   # distdoctor-<version>.dist-info
tops = {n.split("/")[0] for n in names}
assert tops == {"distdoctor", info}, f"top-level names in the wheel: {sorted(tops)}"
for need in ("distdoctor/SKILL.md", "distdoctor/references/taxonomy.yaml", "distdoctor/patches/__init__.py",
             "distdoctor/patches/gloo_backend.py", "distdoctor/profiles/local.md",
             "distdoctor/schemas/entry.schema.json", "distdoctor/cli.py"):
    assert need in names, f"{need} is not in the wheel"
meta = zipfile.ZipFile(sys.argv[1]).read(f"{info}/METADATA").decode()
assert "License-Expression: MIT" in meta, "no License-Expression: MIT in METADATA"
print(f"wheel: {len(names)} files, top-level {sorted(tops)}")
EOF
"$PY" -m venv "$WORK/wheelenv"
quiet_pip "$WORK/wheelenv/bin/pip" install -q "$WHEEL"
W="$WORK/wheelenv/bin"
cd "$WORK/elsewhere"
if "$W/python" -c "import torch" 2>/dev/null; then fail "the wheel's venv has torch"; fi
if "$W/python" -c "import patches" 2>/dev/null; then fail "a top-level 'patches' module is installed"; fi
expect '"id": "compile_toolchain"' "$W/distdoctor" diagnose "$LOG" --json
expect '^gloo_backend ' "$W/distdoctor" patch --list
"$W/distdoctor" validate
expect 'nproc_per_node=2' "$W/python" -m distdoctor launch --profile local --nproc-per-node 2 train.py
expect '^compile_toolchain$' "$W/python" -c "from distdoctor.diagnose import diagnose_text; import sys
print(diagnose_text(open(sys.argv[1]).read())['causes'][0]['id'])" "$LOG"
expect 'SKILL.md$' "$W/python" -c "from distdoctor import paths; print(paths.SKILL if paths.BUNDLED else 'not bundled')"

step "2b. pipx install and uvx --from (a copy of the checkout)"
PIPX_HOME="$WORK/pipx" PIPX_BIN_DIR="$WORK/pipx/bin" "$TOOLS/pipx" install -q "$SRC" >/dev/null
expect 'compile_toolchain' "$WORK/pipx/bin/distdoctor" diagnose "$LOG"
expect 'compile_toolchain' "$TOOLS/uvx" --quiet --from "$SRC" distdoctor diagnose "$LOG"

step "3. torch-only venv: the skill's scripts through uv run, from another folder and from the skill folder"
if [ -n "$TORCH_PID" ]; then
  wait "$TORCH_PID" || { cat "$WORK/torchenv.log"; rm -rf "$TORCHENV"; fail "python -m venv + pip install torch==2.13.0"; }
  TORCH_PID=
fi
(
  export VIRTUAL_ENV="$TORCHENV" PATH="$TORCHENV/bin:$PATH"
  unset PYTHONDONTWRITEBYTECODE   # the scripts themselves must not write __pycache__ into the folder
  UV="$TOOLS/uv"
  python -c "import torch" || fail "the torch-only venv has no torch"
  if python -c "import yaml" 2>/dev/null; then fail "the torch-only venv has pyyaml"; fi
  expect '"id": "compile_toolchain"' "$UV" run --quiet "$SKILL/scripts/diagnose.py" "$LOG" --json
  expect '^gloo_backend ' "$UV" run --quiet "$SKILL/scripts/patch_backend.py" --list
  cp -r "$REPO/examples/broken_ddp" "$WORK/elsewhere/repo"
  expect ' gloo_backend ' "$UV" run --quiet "$SKILL/scripts/patch_backend.py" "$WORK/elsewhere/repo" --dry-run --quiet
  expect 'torchrun' "$UV" run --quiet "$SKILL/scripts/launch.py" --profile local --nproc-per-node 2 train.py
  "$UV" run --quiet "$SKILL/scripts/validate_kb.py"
  "$UV" run --quiet "$SKILL/scripts/dump_stacks.py" --list || [ $? -eq 3 ]   # 3: no rank process on this host
  cd "$SKILL"   # from inside the skill folder too: uv must not make a project .venv or uv.lock there
  expect 'compile_toolchain' "$UV" run --quiet scripts/diagnose.py "$LOG"
  cd "$WORK/elsewhere"
  # without uv and without the packages: one line naming them and the install command, exit 2; --help works
  rc=0; python "$SKILL/scripts/diagnose.py" "$LOG" >"$WORK/out" 2>&1 || rc=$?
  [ "$rc" = 2 ] && [ "$(wc -l <"$WORK/out")" = 1 ] && grep -q "pip install pyyaml" "$WORK/out" \
    || fail "diagnose.py without its packages: exit $rc: $(cat "$WORK/out")"
  expect '^usage: diagnose.py' python "$SKILL/scripts/diagnose.py" --help
  expect '^usage: patch_backend.py' python "$SKILL/scripts/patch_backend.py" --help
  # the probe runs inside the job: the job's interpreter (torch, nothing else) under torchrun
  expect '^VERDICT: OK - all 2 rank' env OMP_NUM_THREADS=1 timeout 120 torchrun --standalone --nproc_per_node=2 \
    "$SKILL/scripts/probe.py" --expect-world-size 2 --timeout 60
)
snapshot >"$WORK/skill.after"
diff "$WORK/skill.before" "$WORK/skill.after" || fail "validating or running the scripts changed the skill folder (diff above)"

step "4. Claude Code plugin: claude plugin validate --strict; installed from the marketplace"
cd "$REPO"
(
  export HOME="$WORK/claude-home"; mkdir -p "$HOME"   # claude writes its settings here, not in the real home
  claude plugin validate --strict .claude-plugin/plugin.json </dev/null
  claude plugin validate --strict . </dev/null
  claude plugin marketplace add "$SKILL" </dev/null >/dev/null
  claude plugin install distdoctor@distdoctor </dev/null >/dev/null
  claude plugin details distdoctor </dev/null >"$WORK/details.txt"
  grep -E "^ *Skills \([0-9]+\)" "$WORK/details.txt" | tr -d ',' | tr ' ' '\n' >"$WORK/skills.txt"
  for s in distdoctor diagnose patch hang probe; do
    grep -qx "$s" "$WORK/skills.txt" || { cat "$WORK/details.txt"; fail "plugin has no skill or command '$s'"; }
  done
)
printf '\n[package] all checks passed in %ss\n' "$((SECONDS - START))"
