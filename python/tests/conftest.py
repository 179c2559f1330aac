"""The `dpfl` CLI binary, when one is built next to this checkout (``scripts/test.sh`` runs
the cargo suite first, which builds ``target/debug/dpfl``) or named by ``$DPFL_CLI``: tests
that compare with it live use the ``cli`` fixture; the rest compare with values recorded
from it."""

import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _cli_path():
    env = os.environ.get("DPFL_CLI")
    if env:
        return env if os.path.exists(env) else None
    p = ROOT / "target" / "debug" / "dpfl"
    return str(p) if p.exists() else None



class Cli:
    def __init__(self, path):
        self.path = path

    def run(self, *args):
        return subprocess.run([self.path, *args], capture_output=True, text=True, timeout=600)

    def json(self, *args):
        r = self.run(*args)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)


@pytest.fixture(scope="session")
def cli():
    path = _cli_path()
    if path is None:
        pytest.skip("no dpfl binary (build it with cargo test, or set DPFL_CLI)")
    return Cli(path)


@pytest.fixture(autouse=True)
def _ledger_dir(tmp_path, monkeypatch):
    """dpfl.flower keeps ledgers on disk by default (``$DPFL_LEDGER_DIR``): never the user's."""
    monkeypatch.setenv("DPFL_LEDGER_DIR", str(tmp_path / "ledgers"))


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "slow: over ~60 s here (real Flower runs on a 2-core machine); the longer suite "
        "(`bash scripts/test.sh --long`, which CI runs too) runs them, the test command skips them",
    )
