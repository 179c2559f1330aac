"""Real Flower processes for the tests (issue 29): a SuperLink (deployment or simulation
runtime), SuperNodes on 127.0.0.1, and ``flwr run`` against them, each started by the test
with the pinned flwr's own command-line tools, remembered by PID and killed by PID at the
end; every wait has a deadline, so a hang fails the test instead of blocking CI.

Flower 1.42's flags: ``flower-superlink --insecure --host H --port P`` (one HTTP port for the
Fleet, Control and Runtime APIs; ``--simulation`` for the simulation runtime, which runs the
ClientApps on the Ray backend), ``flower-supernode --insecure --superlink H:P --port Q
--node-config 'k=v ...'``, and ``flwr run APP CONNECTION`` where CONNECTION names a
``[superlink.<name>]`` entry in ``$FLWR_HOME/config.toml``."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path
from typing import Dict, List, Optional

BIN = Path(sys.executable).parent


def _descendants(root: int) -> List[int]:
    children: Dict[int, List[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = open(f"/proc/{d}/stat").read()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Flower:
    """The processes of one test. ``with Flower(tmp) as f: ...`` kills them all by PID."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = Path(tmp)
        self.home = self.tmp / "flwr-home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.procs: Dict[str, subprocess.Popen] = {}
        self.port: Optional[int] = None
        self.env = dict(os.environ, FLWR_HOME=str(self.home), FLWR_DISABLE_UPDATE_CHECK="1",
                        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", RAY_USAGE_STATS_ENABLED="0",
                        PYTHONUNBUFFERED="1")

    def __enter__(self) -> "Flower":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self, name: str, args: List[str], env: Optional[Dict[str, str]] = None) -> subprocess.Popen:
        log = open(self.tmp / f"{name}.log", "ab")
        p = subprocess.Popen([str(BIN / args[0]), *args[1:]], stdout=log, stderr=subprocess.STDOUT,
                             env={**self.env, **(env or {})}, start_new_session=True)
        self.procs[name] = p
        return p

    def log(self, name: str) -> str:
        p = self.tmp / f"{name}.log"
        return p.read_text(errors="replace") if p.exists() else ""

    def kill(self, name: str) -> None:
        """SIGKILL the process and every descendant, each by PID (Flower starts some children,
        e.g. its SuperExec, in sessions of their own, out of reach of the process group)."""
        p = self.procs.pop(name)
        for pid in [p.pid, *_descendants(p.pid)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        p.wait(timeout=30)

    def close(self) -> None:
        for name in list(self.procs):
            self.kill(name)

    def superlink(self, simulation: bool = False, timeout: float = 60) -> int:
        self.port = free_port()
        args = ["flower-superlink", "--insecure", "--disable-runtime-dependency-installation",
                "--host", "127.0.0.1", "--port", str(self.port), "--database", str(self.tmp / "superlink.db")]
        self._start("superlink", args + (["--simulation"] if simulation else []))
        (self.home / "config.toml").write_text(textwrap.dedent(f"""\
            [superlink]
            default = "test"

            [superlink.test]
            address = "127.0.0.1:{self.port}"
            insecure = true
            """))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.procs["superlink"].poll() is not None:
                raise RuntimeError("flower-superlink exited:\n" + self.log("superlink"))
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                    if r.status == 200:
                        return self.port
            except OSError:
                time.sleep(0.5)
        raise TimeoutError("flower-superlink did not come up:\n" + self.log("superlink"))

    def supernode(self, name: str, node_config: str, env: Optional[Dict[str, str]] = None) -> subprocess.Popen:
        assert self.port is not None, "start the SuperLink first"
        return self._start(name, ["flower-supernode", "--insecure", "--superlink", f"127.0.0.1:{self.port}",
                                  "--port", str(free_port()), "--node-config", node_config], env)

    def flwr(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([str(BIN / "flwr"), *args], capture_output=True, text=True, env=self.env,
                              timeout=timeout)

    def run(self, app: Path, *, federation_config: Optional[str] = None, run_config: Optional[str] = None,
            timeout: float = 300) -> Dict[str, object]:
        """``flwr run`` the app and wait until the run finishes: its ``flwr ls`` entry (with
        ``status``) and its log (``flwr log --show``)."""
        return self.wait(self.start(app, federation_config=federation_config, run_config=run_config), timeout)

    def start(self, app: Path, *, federation_config: Optional[str] = None, run_config: Optional[str] = None) -> int:
        """``flwr run`` the app; its run id (the run goes on)."""
        args = ["run", str(app), "test", "--format", "json"]
        if federation_config:
            args += ["--federation-config", federation_config]
        if run_config:
            args += ["--run-config", run_config]
        r = self.flwr(*args)
        assert r.returncode == 0, f"flwr run failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
        return int(json.loads(r.stdout)["run-id"])

    def wait(self, run_id: int, timeout: float = 300) -> Dict[str, object]:
        """Waits until run ``run_id`` finishes: its ``flwr ls`` entry and its log."""
        deadline = time.monotonic() + timeout
        while True:
            info = self.status(run_id)
            if str(info.get("status", "")).startswith("finished"):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {run_id} did not finish in {timeout} s: {info}\n{self.logs(run_id)}")
            time.sleep(1.0)
        info["log"] = self.logs(run_id)
        return info

    def status(self, run_id: int) -> Dict[str, object]:
        r = self.flwr("ls", "test", "--run-id", str(run_id), "--format", "json")
        assert r.returncode == 0, r.stdout + r.stderr
        runs = json.loads(r.stdout)["runs"]
        return dict(runs[0])

    def logs(self, run_id: int) -> str:
        r = self.flwr("log", str(run_id), "test", "--show")
        return r.stdout + r.stderr


def write_app(root: Path, name: str, *, server: str, client: str, config: Dict[str, object]) -> Path:
    """A Flower app directory, as ``flwr new`` lays one out: ``pyproject.toml`` with the
    components and the run config, and a package with ``server_app.py`` / ``client_app.py``."""
    app = root / name
    pkg = app / name
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "server_app.py").write_text(textwrap.dedent(server))
    (pkg / "client_app.py").write_text(textwrap.dedent(client))
    lines = []
    for k, v in config.items():
        lines.append(f"{k} = {json.dumps(v)}")
    (app / "pyproject.toml").write_text(textwrap.dedent(f"""\
        [build-system]
        requires = ["hatchling"]
        build-backend = "hatchling.build"

        [project]
        name = "{name}"
        version = "1.0.0"
        description = "a dpfl test app"
        license = "MIT"
        dependencies = []

        [tool.hatch.build.targets.wheel]
        packages = ["."]

        [tool.flwr.app]
        publisher = "dpfl"

        [tool.flwr.app.components]
        serverapp = "{name}.server_app:app"
        clientapp = "{name}.client_app:app"

        [tool.flwr.app.config]
        """) + "\n".join(lines) + "\n")
    return app


def train_once(cli, tmp_path_factory, exp: Path) -> Path:
    """`dpfl train` of `exp` into a fresh directory (a module fixture's body): the models and
    ledgers every Flower run of `exp` must equal."""
    d = tmp_path_factory.mktemp("train")
    r = cli.run("train", "--config", str(exp), "--out", str(d), "--quiet", "--force")
    assert r.returncode == 0, r.stderr
    return d
