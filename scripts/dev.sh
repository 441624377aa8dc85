#!/usr/bin/env bash
# Set up the project's environment (.venv, torch 2.13.0 CPU pinned) and run a task.
#   bash scripts/dev.sh demo   patch the bundled broken example, then run it with torchrun (2 ranks, gloo)
#   bash scripts/dev.sh test   run the test suite
#   bash scripts/dev.sh setup  only create/refresh .venv
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
ready() { .venv/bin/python -c "import distdoctor, torch, libcst, yaml, jsonschema, bm25s, pytest, xdist" 2>/dev/null && [ -x .venv/bin/py-spy ]; }
if [ ! -x .venv/bin/python ] || ! ready; then
  echo "[dev.sh] creating .venv and installing distdoctor[dev] (torch==2.13.0, CPU)" >&2
  "$PY" -m venv .venv
  .venv/bin/pip install -q --upgrade pip >/dev/null 2>&1 || true
  .venv/bin/pip install -q -e '.[dev]' 2>&1 | grep -v '^WARNING: Location' || true
  ready || { echo "[dev.sh] .venv is incomplete after pip install (see above)" >&2; exit 1; }
fi
task=${1:-test}; shift || true
case "$task" in
  setup) ;;
  demo) exec .venv/bin/python scripts/demo.py "$@" ;;
  # test files run in parallel worker processes (pytest-xdist), a whole file per worker so that its
  # module fixtures (a Slurm cluster, a set of live hangs) start once, the longest files first (tests/conftest.py);
  # DISTDOCTOR_TEST_WORKERS=1 runs serially
  test) workers=${DISTDOCTOR_TEST_WORKERS:-$(n=$(nproc 2>/dev/null || echo 2); echo $(( n < 2 ? 2 : (n > 4 ? 4 : n) )))}
        if [ "$workers" -le 1 ]; then exec .venv/bin/python -m pytest -q "$@"; fi
        exec .venv/bin/python -m pytest -q -n "$workers" --dist loadfile --no-loadscope-reorder "$@" ;;
  *) echo "usage: bash scripts/dev.sh demo|test|setup [args]" >&2; exit 2 ;;
esac
