"""benchmarks/compare_runs.py: what it finds between two run tables (a change within the seeds' spread or not)."""
import json

import numpy as np
import pandas as pd
from helpers import benchmark_script


def _table(shift=0.0, noise=0.0, seed=0, dtype=None):
    """40 configurations x 3 seeds; a seed's accuracy is the configuration's level plus a seed effect."""
    rng = np.random.default_rng(seed)
    rows = []
    for lr in range(40):
        for s in range(3):
            base = 0.5 + 0.01 * lr + 0.02 * np.sin(7 * lr + 3 * s)
            value = base + shift + noise * rng.standard_normal()
            rows.append({"study": "image", "setting": "d100", "method": "ingo", "params.lr": float(lr), "seed": s,
                         "problem.noise_rate": 0.2, **({"problem.dtype": dtype} if dtype else {}),
                         "final.test_accuracy": value, "curve.test_accuracy": np.array([0.1, value / 2, value])})
    return pd.DataFrame(rows)


def _claims(path, verdict):
    path.write_text(json.dumps({"claims": [{"id": "a", "verdict": "not reproduced"}, {"id": "b", "verdict": verdict}]}))
    return str(path)


def _run(tmp_path, capsys, old, new, *args):
    old.to_parquet(tmp_path / "old.parquet")
    new.to_parquet(tmp_path / "new.parquet")
    rc = benchmark_script("compare_runs").main([str(tmp_path / "old.parquet"), str(tmp_path / "new.parquet"), *args])
    return rc, capsys.readouterr().out


def test_rounding_level_changes_pass_and_are_paired_by_seed(tmp_path, capsys):
    claims = _claims(tmp_path / "o.json", "inconclusive"), _claims(tmp_path / "n.json", "inconclusive")
    rc, out = _run(tmp_path, capsys, _table(), _table(noise=1e-4, dtype="float32"), "--ignore", "problem.dtype",
                   "--claims", *claims)
    assert rc == 0 and "0 old and 0 new without a match" in out and "every verdict unchanged" in out
    assert "120 pairs, 0.0% equal" in out and "p < 0.05 in 0.0%" in out  # tiny against the seeds' spread


def test_a_shift_beyond_the_seeds_spread_and_a_changed_verdict_are_found(tmp_path, capsys):
    rc, out = _run(tmp_path, capsys, _table(), _table(shift=0.1, noise=1e-3), "--claims",
                   _claims(tmp_path / "o.json", "inconclusive"), _claims(tmp_path / "n.json", "reproduced"))
    assert rc == 1 and "VERDICTS DIFFER" in out and "b: inconclusive -> reproduced" in out
    assert "p < 0.05 in 100.0%" in out and "mean difference new - old +0.1" in out
    assert "p < 0.05 at 66.7% of them" in out  # 2 of 3 curve points moved; the first (0.1) did not


def test_a_config_column_not_ignored_leaves_runs_unmatched(tmp_path, capsys):
    rc, out = _run(tmp_path, capsys, _table(), _table(dtype="float32"))
    assert rc == 1 and "120 old and 120 new without a match" in out and "with --ignore" in out


def test_common_compares_what_a_table_still_being_made_holds(tmp_path, capsys):
    old, new = _table(), _table(noise=1e-4)
    new = new[new["params.lr"] < 20]  # half the configurations so far
    rc, out = _run(tmp_path, capsys, old, new)
    assert rc == 1 and "60 old and 0 new without a match" in out
    rc, out = _run(tmp_path, capsys, old, new, "--common")
    assert rc == 0 and "60 pairs" in out and "20 configurations" in out


def test_decades_of_one_method_compare_errors_that_span_many(tmp_path, capsys):
    """--log10: a factor of 10 on errors of 1e-8..1e2 is a shift of one decade in every configuration (a raw
    difference would be ruled by the largest errors alone); --method leaves the other methods' runs out."""
    def errors(factor):
        table = _table().rename(columns={"final.test_accuracy": "final.error", "curve.test_accuracy": "curve.error"})
        table["final.error"] = 10.0 ** (-8 + table["params.lr"] / 4 + table["seed"] / 10) * factor
        table["curve.error"] = [np.array([1.0, 0.0, e]) for e in table["final.error"]]  # an exact 0 stays a number
        other = table.assign(method="sabo")
        return pd.concat([table, other.assign(**{"final.error": other["final.error"] * 3.0})], ignore_index=True)

    rc, out = _run(tmp_path, capsys, errors(1.0), errors(10.0), "--metric", "final.error", "--curve", "curve.error",
                   "--log10", "--method", "ingo")
    assert rc == 0 and "120 old runs, 120 new runs" in out
    assert "p < 0.05 in 100.0%" in out and "mean difference new - old +1 " in out
    assert "p < 0.05 at 33.3% of them" in out  # the last point moved a decade; 1.0 and the exact 0 did not


def test_curves_that_end_early_are_compared_where_the_seeds_reached(tmp_path, capsys):
    """A diverged run's curve ends there: the curves are padded, each point compared among the seeds that reached it
    (a point two seeds of a side did not reach is left out)."""
    def cut(table):
        table = table.copy()
        table["curve.test_accuracy"] = [c[:2] if s == 0 else c for c, s in zip(table["curve.test_accuracy"],
                                                                             table["seed"])]
        return table

    rc, out = _run(tmp_path, capsys, cut(_table()), cut(_table(shift=0.1, noise=1e-3)))
    assert rc == 0 and "120 curve points of 40 configurations" in out  # 3 points each: seeds 1, 2 reach the last
    share = float(out.split("p < 0.05 at ")[1].split("%")[0])
    assert 33.3 < share <= 66.7  # the middle point moved everywhere (3 seeds), the last one (2 seeds) mostly
