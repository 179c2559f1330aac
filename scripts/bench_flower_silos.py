"""Issue 29 item 5: one Flower simulation (flwr run on a --simulation SuperLink, Ray backend)
of a dpfl experiment with many silos against `dpfl train` of the same experiment: wall time
and peak memory (the sum of the resident sets of every process of the run, sampled every
0.2 s), and whether the two models are bit for bit equal.

    nice -n 10 target/python-venv/bin/python scripts/bench_flower_silos.py \\
        --silos 1000 --features 9999 --train 4 --rounds 2 --out /tmp/bench-flower

Needs the venv of scripts/test.sh (flwr[simulation], dpfl with dpfl.halves) and target/debug/dpfl
(or --dpfl). Writes OUT/result.json and prints it."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python" / "tests"))
from flower_harness import Flower, _descendants, write_app  # noqa: E402

EXPERIMENT = """name = "flower {silos} silos"
rounds = {rounds}
seed = 3
participation = {{ kind = "all" }}

[data]
source = {{ kind = "synthetic", task = "binary", silos = {silos}, train = {train}, test = 2, features = {features}, shift = 0.5 }}

[model]
kind = "logistic"

[privacy]
epsilon = 2.0
delta = 1e-5
lipschitz = 1.0

[[algorithms]]
label = "ISRL-DP MB-SGD"
kind = "mb-sgd"
calibration = "accountant"
step_size = 0.5
batch_size = {train}
"""

CLIENT = """
import functools
from dpfl import halves
from dpfl.flower.apps import silo_app

@functools.lru_cache(maxsize=None)
def silos(path):
    return halves.experiment_data(path)

app = silo_app(lambda silo, context: silos(str(context.run_config["dpfl-experiment"]))[silo])
"""

SERVER = """
from dpfl.flower.apps import server_app

app = server_app()
"""


def rss_kib(pids):
    total = 0
    for pid in pids:
        try:
            for line in open(f"/proc/{pid}/status"):
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


class Peak(threading.Thread):
    """Peak of the summed RSS of ``roots`` and all their descendants."""

    def __init__(self, roots):
        super().__init__(daemon=True)
        self.roots, self.peak, self.stop = roots, 0, threading.Event()

    def run(self):
        while not self.stop.is_set():
            pids = set()
            for r in self.roots():
                pids.add(r)
                pids.update(_descendants(r))
            self.peak = max(self.peak, rss_kib(pids))
            time.sleep(0.2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--silos", type=int, default=1000)
    ap.add_argument("--features", type=int, default=9999)
    ap.add_argument("--train", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--dpfl", default=str(Path(__file__).resolve().parents[1] / "target" / "debug" / "dpfl"))
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    exp = a.out / "experiment.toml"
    exp.write_text(EXPERIMENT.format(**vars(a)))
    result = {"silos": a.silos, "features": a.features, "train_per_silo": a.train, "rounds": a.rounds}

    t0 = time.monotonic()
    p = subprocess.Popen([a.dpfl, "train", "--config", str(exp), "--out", str(a.out / "train"), "--quiet", "--force"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = Peak(lambda: [p.pid])
    peak.start()
    err = p.communicate()[1]
    peak.stop.set()
    assert p.returncode == 0, err.decode()
    result["dpfl_train"] = {"seconds": round(time.monotonic() - t0, 1), "peak_rss_mib": round(peak.peak / 1024, 1)}
    print(result, flush=True)

    app = write_app(a.out, "benchapp", server=SERVER, client=CLIENT, config={
        "dpfl-experiment": str(exp), "dpfl-algorithm": 0, "dpfl-seed": "plan", "dpfl-out": str(a.out / "flower"),
        "dpfl-server-state": "", "dpfl-stop-after": 1000, "dpfl-timeout": 3600})
    with Flower(a.out / "flwr") as f:
        f.env["DPFL_LEDGER_DIR"] = str(a.out / "ledgers")
        f.superlink(simulation=True)
        peak = Peak(lambda: [q.pid for q in f.procs.values()])
        peak.start()
        t0 = time.monotonic()
        run = f.run(app, federation_config=f"num-supernodes={a.silos}", timeout=6 * 3600)
        peak.stop.set()
        result["flower"] = {"seconds": round(time.monotonic() - t0, 1), "peak_rss_mib": round(peak.peak / 1024, 1),
                            "status": run["status"], "serverapp_seconds": run.get("compute-time")}
    if run["status"] == "finished:completed":
        import numpy as np
        import dpfl

        model = np.load(a.out / "flower" / "model.npy")
        want = dpfl.load_model(a.out / "train" / "models" / "1-isrl-dp-mb-sgd").weights
        result["bit_for_bit_equal_to_dpfl_train"] = bool(np.array_equal(model.view(np.uint64), want.view(np.uint64)))
    result["load_average"] = os.getloadavg()
    (a.out / "result.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
