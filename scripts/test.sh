#!/usr/bin/env bash
# The test suite (what CI runs, via .ci/run): the cargo workspace, then the Python package —
# its wheel built with maturin into a virtual environment and its pytest tests run, some of
# them against the `dpfl` binary the cargo step built (target/debug/dpfl).
#
# Needs network access to crates.io and PyPI only (maturin, numpy, pytest, pandas).
# PYTHON picks the interpreter (default python3, >= 3.9); DPFL_SKIP_PYTHON=1 runs cargo only.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"

cargo test --workspace --locked

if [ "${DPFL_SKIP_PYTHON:-}" = 1 ]; then
  echo "DPFL_SKIP_PYTHON=1: Python package tests skipped" >&2
  exit 0
fi
start=$(date +%s)
python="${PYTHON:-python3}"
venv="$root/target/python-venv"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "maturin==1.16.0" "numpy>=1.21" "pytest>=7" "pandas>=1.3"
# Flower for the dpfl.flower tests (skipped, and said so, if it does not install).
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "flwr==1.41.0" ||
  echo "flwr did not install: the Flower tests (python/tests/test_flower.py) are skipped" >&2
# The extension is its own cargo workspace (python/Cargo.toml says why). Built into the main
# target/ in the dev profile, it reuses the dependencies the cargo step compiled (the dev and
# test profiles build dependencies identically); `--profile test` would make maturin build a
# test harness, not a loadable module.
rm -rf "$root/target/python-wheels"
CARGO_TARGET_DIR="$root/target" "$venv/bin/maturin" build --quiet --locked \
  -m python/Cargo.toml -i "$venv/bin/python" -o "$root/target/python-wheels"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps \
  "$root"/target/python-wheels/dpfl-*.whl
# From python/tests, not python/: the installed wheel is imported, not the source tree.
(cd python/tests && DPFL_CLI="${DPFL_CLI:-$root/target/debug/dpfl}" "$venv/bin/python" -m pytest -q -p no:cacheprovider .)
echo "python package: built and tested in $(( $(date +%s) - start )) s" >&2
