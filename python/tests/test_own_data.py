"""Own data split by a silo column (dpfl.init), saved models (dpfl.load_model), and the CLI's
predict/evaluate on the same model giving the same numbers."""

import csv
import json
import pathlib

import numpy as np
import pytest

import dpfl


def write_hospitals(path: pathlib.Path, n: int = 240) -> None:
    rng = np.random.default_rng(3)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["age", "sex", "hospital", "outcome"])
        for i in range(n):
            age = 30 + 40 * rng.random()
            sex = ["f", "m"][i % 2]
            hospital = ["north", "south", "east"][i % 3]
            outcome = "sick" if age + (5 if sex == "m" else 0) > 52 else "well"
            w.writerow([f"{age:.3f}", sex, hospital, outcome])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    d = tmp_path_factory.mktemp("own")
    write_hospitals(d / "patients.csv")
    toml = dpfl.init(d / "patients.csv", "outcome", silo_column="hospital")
    # dpfl.init writes the path as given; the file lives next to the data.
    toml = toml.replace(f'path = "{d / "patients.csv"}"', 'path = "patients.csv"')
    (d / "exp.toml").write_text(toml)
    result = dpfl.train(d / "exp.toml", out=d / "out", progress=False)
    return d, toml, result


def test_init_reads_the_file_and_splits_by_the_column(trained):
    d, toml, result = trained
    assert 'partition = { kind = "by-column", column = "hospital" }' in toml
    assert 'kind = "logistic"' in toml and 'standardize = ["age"]' in toml
    report = dpfl.check_config(d / "exp.toml")
    # 80 rows per hospital; 16 test rows (0.2 x 80), so 64 training rows each.
    assert report.count("64") >= 3, report
    s = {r["algorithm"]: r for r in result.summary}["ISRL-DP MB-SGD"]
    assert len(s["privacy"]) == 3
    # delta = 1/n^2 with n = 64 training rows per silo
    assert s["delta"] == pytest.approx(1 / 64**2)


def test_saved_model_loads_into_numpy_and_predicts_like_the_cli(trained, cli):
    d, _, result = trained
    model_dir = d / "out" / "models" / "1-isrl-dp-mb-sgd"
    m = dpfl.load_model(model_dir)
    assert m.meta["format"] == "dpfl-model" and m.meta["format_version"] == 1
    assert m.classes == ["sick", "well"]
    assert m.feature_names == ["age", "sex=f", "sex=m", "intercept"]
    assert m.weights.dtype == np.float64 and m.weights.shape == (4,)
    assert m.certified_epsilon is not None and m.certified_epsilon <= 1.0 + 1e-9
    preds = m.predict(d / "patients.csv")
    assert len(preds) == 240 and set(preds) <= {"sick", "well"}
    # Logistic regression by hand: standardised age, one-hot sex, intercept.
    st = m.meta["preprocessing"]["standardizer"]
    rows = list(csv.DictReader(open(d / "patients.csv")))
    for i in (0, 1, 17):
        age = (float(rows[i]["age"]) - st["mean"][0]) / st["scale"][0]
        x = np.array([age, rows[i]["sex"] == "f", rows[i]["sex"] == "m", 1.0], dtype="f8")
        assert preds[i] == ("well" if x @ m.weights > 0 else "sick")
    ev = m.evaluate(d / "patients.csv")
    assert ev["metric"] == "test_error" and ev["rows"] == 240
    assert ev["value"] == pytest.approx(np.mean(preds != np.array([r["outcome"] for r in rows])))
    # The CLI, on the same model: same predictions, same metric.
    out = d / "preds.csv"
    cli.json("predict", "--model", str(model_dir), "--data", str(d / "patients.csv"), "--out", str(out))
    got = [r["prediction"] for r in csv.DictReader(open(out))]
    assert got == list(preds)
    e = cli.json("evaluate", "--model", str(model_dir), "--data", str(d / "patients.csv"))
    assert e["value"] == ev["value"]
    # --out refuses to overwrite
    r = cli.run("predict", "--model", str(model_dir), "--data", str(d / "patients.csv"), "--out", str(out))
    assert r.returncode == 2 and "--force" in r.stderr


def test_predict_without_label_and_damaged_weights(trained, tmp_path):
    d, _, _ = trained
    src = d / "out" / "models" / "1-isrl-dp-mb-sgd"
    rows = list(csv.DictReader(open(d / "patients.csv")))
    unlabelled = tmp_path / "new.csv"
    with open(unlabelled, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["sex", "age"])  # other order, no label, no silo column
        for r in rows[:5]:
            w.writerow([r["sex"], r["age"]])
    m = dpfl.load_model(src)
    assert list(m.predict(unlabelled)) == list(m.predict(d / "patients.csv")[:5])
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "model.json").write_text((src / "model.json").read_text())
    w = bytearray((src / "model.safetensors").read_bytes())
    w[-1] ^= 1
    (bad / "model.safetensors").write_bytes(bytes(w))
    with pytest.raises(dpfl.RunError, match="SHA-256"):
        dpfl.load_model(bad)
    meta = json.loads((src / "model.json").read_text())
    meta["format_version"] = 99
    (bad / "model.json").write_text(json.dumps(meta))
    with pytest.raises(dpfl.RunError, match="format_version"):
        dpfl.load_model(bad)


def test_training_curves_are_written(trained):
    d, _, _ = trained
    svg = (d / "out" / "curves.svg").read_text()
    assert "training loss against rounds" in svg and "ISRL-DP MB-SGD" in svg
    assert "N = 3 silos" in svg
    # The wheel builds dpfl-lab without its `png` feature (python/Cargo.toml): SVG only;
    # scripts/test.sh's `shared-test-build` links the CLI's dpfl-lab, which writes PNG too.
    assert (d / "out" / "curves.png").exists() == dpfl._core._writes_png


def test_errors_name_file_line_and_column(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("age,site,y\n1,a,p\n2,,n\n")
    toml = dpfl.init(p, "y", silo_column="site")
    (tmp_path / "e.toml").write_text(toml)
    with pytest.raises(dpfl.RunError, match=r"d\.csv:3: column 2 \(`site`\): empty silo name"):
        dpfl.check_config(tmp_path / "e.toml")
    with pytest.raises(dpfl.ConfigError, match="`ward` is not in the header"):
        dpfl.init(p, "y", silo_column="ward")
