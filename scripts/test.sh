#!/usr/bin/env bash
# The test suite. `bash scripts/test.sh` is the contributor's suite (the README's test command):
# the cargo workspace without the Rust tests listed in scripts/long-tests.txt, then the Python
# package — its wheel built with maturin into a virtual environment and its pytest tests run,
# some of them against the `dpfl` binary the cargo step built (target/debug/dpfl) — without the
# tests marked `slow`.
# `bash scripts/test.sh --long` is the longer suite: the Rust tests of scripts/long-tests.txt
# (whole reproductions, networked runs that kill processes) and the Python tests marked `slow`
# (real Flower simulations and SuperLink/SuperNode deployments, minutes each on 2 cores). CI
# (.ci/run) runs both, the contributor's suite first; together they run every test.
#
# Needs network access to crates.io and PyPI only (maturin, numpy, pytest, pandas, flwr).
# PYTHON picks the interpreter (default python3, >= 3.9); DPFL_SKIP_PYTHON=1 runs cargo only.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
suite=quick
case "${1:-}" in
  "") ;;
  --long) suite=long ;;
  *) echo "usage: bash scripts/test.sh [--long]" >&2; exit 2 ;;
esac

# The report test renders report.html in headless Chromium (crates/dpfl-cli/tests/it/report.rs);
# install Debian's package when it is missing and we may (root with apt), else the test skips
# its rendering part and says so.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get install -y chromium >/dev/null 2>&1 ||
    { apt-get update >/dev/null 2>&1 && apt-get install -y chromium >/dev/null 2>&1; } ||
    echo "chromium did not install: report.html is checked without a browser" >&2
fi

# The Python side's environment (a virtual environment and the packages from PyPI) is made
# while cargo builds: pip is mostly waiting on the network and the disk, and the cargo build
# waits on nothing it does. `--no-compile`: pip would byte-compile every module of every
# package (half of its CPU time); Python compiles the few the tests import when they do.
python="${PYTHON:-python3}"
venv="$root/target/python-venv"
setup_log="$root/target/python-setup.log"
python_setup() {
  set -e
  if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
  fi
  pip=("$venv/bin/python" -m pip install --quiet --no-compile --disable-pip-version-check)
  "${pip[@]}" "maturin==1.16.0" "numpy>=1.21" "pytest>=7" "pandas>=1.3"
  # dp-accounting, whose event objects dpfl.account accepts (python/tests/test_accounting_compat.py
  # compares with it; skipped, and said so, if it does not install).
  "${pip[@]}" "dp-accounting==0.6.0" ||
    echo "dp-accounting did not install: its comparison test is skipped" >&2
  # Flower for the dpfl.flower tests (python/tests/test_flower*.py; skipped, and said so, if it
  # does not install). The pinned version is the one the README supports. Its Ray simulation
  # backend (a 74 MB wheel) only for the longer suite, whose tests run real simulations and real
  # SuperLink/SuperNode deployments; the contributor's suite's Flower tests need no Ray.
  if [ "$suite" = quick ]; then flower="flwr==1.42.0"; else flower="flwr[simulation]==1.42.0"; fi
  "${pip[@]}" "$flower" ||
    echo "$flower did not install: the Flower tests (python/tests/test_flower*.py) are skipped" >&2
}
# Only beside the contributor's suite, whose cargo step starts with a build: the longer suite's
# cargo step is its networked tests, whose deadlines pip's CPU would crowd; it installs after.
setup_pid=
if [ "${DPFL_SKIP_PYTHON:-}" != 1 ] && [ "$suite" = quick ]; then
  mkdir -p "$root/target"
  ( python_setup ) >"$setup_log" 2>&1 &
  setup_pid=$!
  # A failing cargo step ends the script: the installs end with it.
  trap 'kill "$setup_pid" 2>/dev/null || true' EXIT
fi

# The long suite's Rust tests: one libtest filter per line (comments and blank lines left out).
mapfile -t long_tests < <(grep -v -e '^#' -e '^[[:space:]]*$' scripts/long-tests.txt)
if [ "$suite" = quick ]; then
  skips=()
  for t in "${long_tests[@]}"; do skips+=(--skip "$t"); done
  cargo test --workspace --locked -- "${skips[@]}"
else
  # The same build as the quick suite's (the whole workspace's features: `-p dpfl-cli` alone
  # resolves them differently and recompiled the crates), so after it this only runs tests;
  # the slow Python tests below drive the CLI binary it built.
  cargo test --workspace --locked -- "${long_tests[@]}"
fi

if [ "${DPFL_SKIP_PYTHON:-}" = 1 ]; then
  echo "DPFL_SKIP_PYTHON=1: Python package tests skipped" >&2
  exit 0
fi
if [ -z "$setup_pid" ]; then
  ( python_setup ) >"$setup_log" 2>&1 &
  setup_pid=$!
fi
if ! wait "$setup_pid"; then
  cat "$setup_log" >&2
  echo "the Python environment did not install (log above, also in $setup_log)" >&2
  exit 1
fi
cat "$setup_log" >&2
start=$(date +%s)
# `pip install ./python`, as a user installs it (maturin as the PEP 517 backend, taken from
# the venv: no build isolation), in the dev profile with the `shared-test-build` feature: with
# the test profile's settings and features it links the dpfl, dpfl-privacy and dpfl-lab (and
# every dependency) the cargo step built instead of compiling them again (python/Cargo.toml
# says how); `--profile test` would make maturin build a test harness, not a loadable module.
PATH="$venv/bin:$PATH" MATURIN_PEP517_ARGS="--profile dev --locked --features shared-test-build" \
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-build-isolation \
  --force-reinstall --no-deps ./python
# From python/tests, not python/: the installed wheel is imported, not the source tree.
if [ "$suite" = quick ]; then marks="not slow"; else marks="slow"; fi
(cd python/tests && DPFL_CLI="${DPFL_CLI:-$root/target/debug/dpfl}" "$venv/bin/python" -m pytest -q -p no:cacheprovider -m "$marks" .)
echo "python package ($suite suite): built and tested in $(( $(date +%s) - start )) s" >&2
