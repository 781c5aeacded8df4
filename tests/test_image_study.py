"""The image study end to end on the digits stand-in, through the command line, plus selection logic."""
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("umap")  # the `image` extra, installed by the dev extra
from replication import rho_readings
from replication.cli import main
from replication.config import expand_grid
from replication.image.report import cell_text, cells, resampled_scores, select
from replication.image.study import configs

ROOT = Path(__file__).resolve().parents[1]


def tiny_params():
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    p = params["image"]
    p["profiles"]["tiny"] = {"seeds": [0, 1], "iterations": 8, "noise_rates": [0.0, 0.4], "dims": ["d100"],
                             "dataset": "digits_stand_in"}
    p["profile"] = "tiny"
    p["dims"] = {"d100": 4, "d1000": 100}
    p["methods"] = {"sabo": {"lr": [0.5], "rho": [1.0, 100.0]}, "ingo": {"lr": [0.5]}, "cmaes": {},
                    "sabo_variant": {"optimizer": "sabo", "lr": [0.5], "rho": [0.5]}}
    return params


def test_expand_grid_is_the_cartesian_product():
    assert expand_grid({"lr": [0.1, 1.0], "rho": [10.0, 50.0], "baseline": "mean"}) == [
        {"baseline": "mean", "lr": 0.1, "rho": 10.0}, {"baseline": "mean", "lr": 0.1, "rho": 50.0},
        {"baseline": "mean", "lr": 1.0, "rho": 10.0}, {"baseline": "mean", "lr": 1.0, "rho": 50.0}]
    assert expand_grid({}) == [{}]


def test_full_profile_has_the_papers_grid():
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    cfgs = configs(params)
    per_cell = {}
    for c in cfgs:
        per_cell.setdefault((c.setting, c.problem["noise_rate"], c.method), set()).add(
            json.dumps(c.params, sort_keys=True))
    assert {len(v) for k, v in per_cell.items() if k[2] == "sabo"} == {16}
    assert {len(v) for k, v in per_cell.items() if k[2] == "bes"} == {12}
    assert {len(v) for k, v in per_cell.items() if k[2] == "ingo"} == {4}
    assert {len(v) for k, v in per_cell.items() if k[2] == "sabo_small_rho"} == {12}
    assert {len(v) for k, v in per_cell.items() if k[2] == "sabo_inverse"} == {16}
    assert len(cfgs) == 2 * 5 * (1 + 1 + 12 + 4 + 16 + 16 + 12) * 3
    assert all(c.problem["name"] == "fashion_mnist" and c.problem["batch_size"] == 2048 for c in cfgs)  # the paper's
    pins = params["image"]["umap"]["sha256"]
    assert all(c.problem["umap"]["sha256"] == pins["fashion_mnist"] for c in cfgs)
    params["image"]["profile"] = "stand_in"  # the same grid on the offline stand-in
    stand_in = configs(params)
    assert len(stand_in) == len(cfgs) and all(c.problem["name"] == "digits_stand_in" for c in stand_in)
    assert all(c.problem["umap"]["sha256"] == pins["digits_stand_in"] for c in stand_in)
    # Fashion-MNIST's losses in float32 (image.dtype); the stand-in's configs, and so their hashes, as before the key
    assert all(c.problem["dtype"] == "float32" for c in cfgs) and all("dtype" not in c.problem for c in stand_in)


def test_a_runs_problem_computes_in_its_configs_dtype(monkeypatch, umap_cache):
    from replication.image.study import make_problem

    monkeypatch.setenv("SABO_BENCH_UMAP_CACHE", str(umap_cache))
    params = tiny_params()
    exact = configs(params)[0]
    params["image"]["dtype"] = {"digits_stand_in": "float32"}
    single = configs(params)[0]
    assert single.problem == {**exact.problem, "dtype": "float32"} and single.hash != exact.hash
    # the same instance: noise, split, P, batches and the optimizer's samples are drawn alike
    assert (single.problem_seed(), single.optimizer_seed()) == (exact.problem_seed(), exact.optimizer_seed())
    a, b = make_problem(exact), make_problem(single)
    assert a.minibatch.dtype == np.float64 and b.minibatch.dtype == np.float32 and b.info["dtype"] == "float32"
    X = np.random.default_rng(0).standard_normal((5, a.dim))
    np.testing.assert_allclose(b.objective(X), a.objective(X), rtol=1e-6)
    assert b.metrics(X[0]) == a.metrics(X[0])  # the metrics are float64 whatever the objective computes in


def test_cost_follows_the_optimizer_a_method_runs_not_its_label():
    """``sabo_small_rho`` runs SABO (two rounds per iteration): it costs what SABO costs for equal
    parameters (it used to be charged as a one-round method), twice INGO's."""
    from dataclasses import replace

    from replication.image.study import cost

    cfgs = configs(yaml.safe_load((ROOT / "params.yaml").read_text()))
    sabo = next(c for c in cfgs if c.method == "sabo")
    small_rho = replace(sabo, method="sabo_small_rho", params={**sabo.params, "optimizer": "sabo"})
    ingo = replace(sabo, method="ingo", params={k: v for k, v in sabo.params.items() if k != "rho"})
    cmaes = replace(sabo, method="cmaes", params={"sigma0": sabo.params["sigma0"], "popsize": sabo.params["popsize"]})
    assert cost(small_rho) == cost(sabo) > cost(ingo) > 0
    metrics = 2 * cost(ingo) - cost(sabo)  # SABO doubles the rest; the curve points' metrics are the same
    assert 0 < metrics < cost(ingo)
    assert cost(cmaes) > cost(ingo)  # pycma's N d^2 work
    assert any(c.method == "sabo_small_rho" for c in cfgs) and all(cost(c) > 0 for c in cfgs)


def test_cost_counts_the_metrics_of_every_curve_point():
    """The quick profile's runs (d = 100, 60 iterations, 51 curve points) took 2.95 s (MMES: 17 evaluations an
    iteration), 6.25 s (INGO: 100) and 7.87-9.13 s (SABO and its readings: 200) of mean wall time in one session
    (2026-11-27): costed about so, where without the metrics MMES cost 0.17 and SABO 2.0 INGO's."""
    from replication.image.study import cost

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["image"]["profile"] = "quick"
    first = {}
    for config in configs(params):
        first.setdefault(config.method, cost(config))
    assert 0.35 < first["mmes"] / first["ingo"] < 0.7
    assert 1.2 < first["sabo"] / first["ingo"] < 1.8


def _slot(lr, val, test, diverged=0):
    return {"params": {"lr": lr}, "val": val, "test": test, "nfev": [100] * len(val), "diverged": diverged}


def test_selection_uses_validation_not_test():
    cell = {"a": _slot(1, [0.9, 0.8], [0.5, 0.5]), "b": _slot(2, [0.1, 0.2], [0.9, 0.9])}
    assert select(cell, "val")["params"] == {"lr": 1} and select(cell, "val")["mean"] == pytest.approx(50.0)
    assert select(cell, "test")["params"] == {"lr": 2}


def _record(status, curve, lr=1.0, seed=0):
    return {"config": {"study": "image", "setting": "d100", "method": "sabo", "seed": seed, "code_version": "x",
                       "problem": {"name": "digits_stand_in", "d_tilde": 10, "noise_rate": 0.0},
                       "params": {"lr": lr}, "budget": {"max_iter": 4}},
            "result": {"status": status, "curve": curve, "final": {k: v[-1] for k, v in curve.items()}}}


def test_a_diverged_run_is_reported_as_diverged_not_as_zero_accuracy():
    """A diverged seed enters no mean; its configuration ranks below fully completed ones; the cell says so."""
    curve = {"nit": [0, 2, 4], "nfev": [0, 400, 800], "val_accuracy": [0.1, 0.5, 0.6], "test_accuracy": [0.1, 0.5, 0.7]}
    records = [_record("completed", curve, seed=0), _record("diverged", curve, seed=1),
               _record("completed", {**curve, "val_accuracy": [0.1, 0.2, 0.3]}, lr=2.0)]
    (cell,) = cells(records).values()
    best = select(cell, "val")
    assert best["params"] == {"lr": 2.0}  # lr=1's better validation does not outrank its diverged seed
    lr1 = select({k: v for k, v in cell.items() if '"lr":1.0' in k}, "val")
    assert lr1["mean"] == pytest.approx(70.0) and lr1["diverged"] == 1 and lr1["seeds"] == 2
    assert cell_text(lr1) == "70.00 (1 seed; 1/2 seeds diverged)" and np.isnan(lr1["std"])  # no "± 0.00"
    all_diverged = select(cells([_record("diverged", curve)])[("d100", 0.0, "sabo")], "val")
    assert np.isnan(all_diverged["mean"]) and cell_text(all_diverged) == "diverged (1/1 seeds)"


def _final(val, test):
    return {"nit": [0, 4], "nfev": [0, 800], "val_accuracy": [0.1, val], "test_accuracy": [0.1, test]}


def test_the_bootstrap_redoes_the_selection_on_each_resample_of_the_seeds():
    """On the seeds as run, resampled_scores is what select reports; on a resample it selects again on the drawn
    seeds' validation accuracy (lr=1 is better on seed 0, lr=2 on seed 1), ranks a drawn diverged seed below, and
    scores -inf where the selected configuration has no finished seed drawn."""
    records = [_record("completed", _final(0.9, 0.5), lr=1.0, seed=0),
               _record("completed", _final(0.25, 0.6), lr=1.0, seed=1),
               _record("completed", _final(0.3, 0.8), lr=2.0, seed=0),
               _record("completed", _final(0.8, 0.7), lr=2.0, seed=1)]
    (cell,) = cells(records).values()
    assert select(cell, "val")["params"] == {"lr": 1.0}   # mean validation 0.575 against 0.55
    scores = resampled_scores(cell, [0, 1], np.array([[0, 1], [0, 0], [1, 1]]))
    assert list(scores) == pytest.approx([select(cell, "val")["mean"], 50.0, 70.0])
    records[1] = _record("diverged", _final(0.25, 0.6), lr=1.0, seed=1)
    (cell,) = cells(records).values()
    assert list(resampled_scores(cell, [0, 1], np.array([[0, 1], [0, 0]]))) == pytest.approx([75.0, 50.0])
    (alone,) = cells([_record("diverged", _final(0.5, 0.5), seed=1),
                      _record("completed", _final(0.5, 0.5), seed=0)]).values()
    assert list(resampled_scores(alone, [0, 1], np.array([[1, 1], [0, 1]]))) == [-np.inf, 50.0]


def test_equal_evaluations_read_the_last_curve_point_within_the_budget():
    curve = {"nit": [0, 2, 4], "nfev": [0, 400, 800], "val_accuracy": [0.1, 0.5, 0.6], "test_accuracy": [0.1, 0.5, 0.7]}
    (cell,) = cells([_record("completed", curve)], max_nfev=799).values()
    (slot,) = cell.values()
    assert slot["test"] == [0.5] and slot["nfev"] == [400]
    (cell,) = cells([_record("completed", curve)], max_nfev=800).values()
    assert next(iter(cell.values()))["test"] == [0.7]


def test_the_report_names_float32_losses_a_deviation():
    from replication.image.report import _precision_text

    single = {"config": {"problem": {"name": "fashion_mnist", "dtype": "float32"}}}
    assert _precision_text([single]).startswith("losses in float32 (DEVIATION, `image.dtype`")
    assert _precision_text([single, {"config": {"problem": {}}}]).startswith("losses in float32 and float64 (DEVIATION")


def test_stand_in_study_end_to_end(tmp_path, monkeypatch, umap_cache):
    monkeypatch.setenv("SABO_BENCH_UMAP_CACHE", str(umap_cache))
    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump(tiny_params()))
    common = ["--params", str(params_file), "--runs-dir", str(tmp_path / "runs")]
    assert main(["prepare", "image", "--params", str(params_file)]) == 0
    assert main(["run", "image", *common, "--workers", "2", "--no-track", "--quiet"]) == 0
    records = [json.loads(p.read_text()) for p in (tmp_path / "runs" / "image").rglob("*.json")]
    assert len(records) == 2 * (2 + 1 + 1 + 1) * 2
    variant = [r for r in records if r["config"]["method"] == "sabo_variant"]
    assert len(variant) == 4 and all(r["result"]["evals_per_iteration"] == 2 * 100 for r in variant)
    assert all("safeguard_perturbation" in r["result"]["stats"] for r in variant)  # it ran SABO
    for r in records:
        final = r["result"]["final"]
        assert 0.0 <= final["test_accuracy"] <= 1.0 and 0.0 <= final["val_accuracy"] <= 1.0
        assert r["result"]["curve"]["nfev"][-1] == 8 * r["result"]["evals_per_iteration"]
    out = tmp_path / "results"
    assert main(["report", "image", *common, "--out", str(out), "--no-track"]) == 0
    md = (out / "noisy_labels.md").read_text()
    assert "digits stand-in for Fashion-MNIST" in md and "paper 76.68" in md
    assert "examples per ask, losses in float64; N = 100" in md
    assert (out / "figures" / "noisy_labels.png").exists()
    claims = json.loads((out / "noisy_labels_claims.json").read_text())
    assert claims["dataset"] == ["digits_stand_in"] and len(claims["claims"]) == 6
    assert all("(95% interval " in c["measurement"] for c in claims["claims"] if c["verdict"] != "not run")
    assert "2,000 resamples" in md and "**inconclusive** when it reaches both" in md
    assert all(c["reason"] for c in claims["claims"] if c["verdict"] == "not reproduced")
    assert "## The rho question" in md and "Selected test accuracy (%) at equal evaluations" in md
    sizes = rho_readings.measured(records, {"sabo", "sabo_variant"}, dim=lambda problem: 10 * problem["d_tilde"])
    moved = {rho: np.median(v["moved"]) for (m, rho, _), v in sizes.items()}
    assert set(moved) == {1.0, 100.0, 0.5} and moved[100.0] > 20 * moved[1.0]  # about rho standard deviations
