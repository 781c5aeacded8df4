"""The BBOB study: cocoex problems through the engine (evaluation counts, COCO's observer output, a run
that restarts), the bookkeeping of target runtimes, the claim checks, cocopp offline, and the ci profile
against its expected verdicts and solved percentages.

Regenerate replication/bbob/ci_expected.json deliberately, with tolerances measured over re-drawn trajectories and
numerical environments (5.5 min on 2 cores), with
`python3 benchmarks/ci_spread.py --study bbob --redraws 9 --env native --env sandybridge:OPENBLAS_CORETYPE=Sandybridge
--env prescott:OPENBLAS_CORETYPE=Prescott --chance 0 --out /tmp/spread-bbob --write replication/bbob/ci_expected.json`.
"""
import copy
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from replication.claims import INCONCLUSIVE, NOT_REPRODUCED, NOT_RUN, REPRODUCED
from replication.cli import main
from replication.config import RunConfig
from replication.engine import execute, files_path, load_record, record_path
from replication.params import validate_params

cocoex = pytest.importorskip("cocoex")
pytest.importorskip("cocopp")

from replication.bbob import study  # noqa: E402  (needs cocoex)
from replication.bbob.problem import TARGETS, CocoProblem  # noqa: E402
from replication.bbob.report import CHECKERS, Context, Run, ert, run_cocopp  # noqa: E402
from replication.bbob.suites import SUITES  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())
METHODS = ("sabo", "ingo", "bes", "cmaes", "mmes")


def ci_params(**suite):
    p = copy.deepcopy(PARAMS)
    p["bbob"]["profile"] = "ci"
    p["bbob"]["profiles"]["ci"]["suites"]["bbob"].update(suite)
    validate_params(p, studies=["bbob"])
    return p


def ci_configs(**suite):
    return study.configs(ci_params(**suite))


def test_suites_table_matches_cocoex():
    for name in ("bbob", "bbob-noisy"):  # bbob-largescale: the whole suite takes seconds to build
        suite = cocoex.Suite(name, "", "")
        info = SUITES[name]
        assert sorted({p.id_function for p in suite}) == info.functions, name
        assert sorted({p.id_instance for p in suite}) == info.instances, name
        assert sorted({p.dimension for p in suite}) == info.dims, name
    large = cocoex.Suite("bbob-largescale", "", "function_indices: 1")
    assert sorted({p.dimension for p in large}) == SUITES["bbob-largescale"].dims
    assert sorted({p.id_instance for p in large}) == SUITES["bbob-largescale"].instances


def test_budget_is_a_multiple_of_the_dimension_and_sabo_runs_the_library_defaults():
    configs = study.configs(PARAMS)  # the reported profile
    assert configs and all(c.budget == {"max_evals": 1000 * c.problem["dim"]} for c in configs)
    sabo = [c for c in configs if c.method == "sabo"]
    assert all(c.params == {"sigma0": 2.0} for c in sabo)  # lr, rho, popsize: SABO()'s defaults
    assert {c.seed for c in configs} == {1, 2, 3} and all(c.seed == c.problem["instance"] for c in configs)


@pytest.mark.parametrize("method", METHODS)
def test_engine_nfev_equals_coco_evaluations_and_the_observer_writes_coco_data(method, tmp_path):
    config, = [c for c in ci_configs(functions=[15]) if c.method == method and c.seed == 1]
    record = execute(config, tmp_path)
    result = record["result"]
    assert result["status"] == "completed"
    nfev = result["final"]["nfev"]
    assert result["final_evaluation"]["coco_evaluations"] == nfev
    per_iteration = result["evals_per_iteration"]
    assert config.budget["max_evals"] - per_iteration < nfev <= config.budget["max_evals"]  # whole iterations that fit
    assert result["curve"]["nfev"][-1] == nfev and result["curve"]["nit"][-1] == result["final"]["nit"]
    coco = files_path(tmp_path, config) / method
    info, = coco.glob("bbobexp_f15.info")
    text = info.read_text()
    assert f"algId = '{method}'" in text and "DIM = 2" in text
    assert f":{nfev}|" in text  # COCO's own evaluation count of the run, in its index file
    assert any(p.stat().st_size > 0 for p in (coco / "data_f15").iterdir())
    assert not list(tmp_path.rglob("*.partial"))


def test_an_interrupted_run_restarts_and_leaves_one_coco_log(tmp_path):
    config, = [c for c in ci_configs(functions=[17]) if c.method == "sabo" and c.seed == 2]
    clean = execute(config, tmp_path / "clean")

    class Killed(Exception):
        pass

    calls = []

    def kill_at_5(_done, _total):  # after the fifth iteration (an evaluation budget: done counts evaluations)
        calls.append(1)
        if len(calls) == 5:
            raise Killed

    with pytest.raises(Killed):
        execute(config, tmp_path / "runs", progress=kill_at_5)
    partial = files_path(tmp_path / "runs", config).with_name(files_path(tmp_path / "runs", config).name + ".partial")
    assert partial.is_dir() and not record_path(tmp_path / "runs", config).exists()
    # a committed directory without its record (killed between the rename and the record) is a leftover too
    stale = files_path(tmp_path / "runs", config) / "sabo" / "stale.info"
    stale.parent.mkdir(parents=True)
    stale.write_text("not this run's")
    again = execute(config, tmp_path / "runs")
    assert again["result"] == clean["result"]
    assert not partial.exists() and not stale.exists()
    infos = list(files_path(tmp_path / "runs", config).rglob("*.info"))
    assert len(infos) == 1 and infos[0].read_text().count("data_f17") == 1  # one run logged, once
    assert not list((tmp_path / "runs").rglob("*.ckpt"))  # such runs are never checkpointed


def test_runtimes_are_the_first_evaluations_reaching_each_target():
    """Across batches, the runtimes agree with a brute-force recomputation from the values returned."""
    problem = CocoProblem("bbob", 1, 2, 1, "sabo")
    rng = np.random.default_rng(3)
    values, centre = [], np.zeros(2)
    for scale in (3.0, 1.0, 0.3, 0.1, 0.01):  # batches drawn closer and closer to the best point so far
        X = centre + scale * rng.standard_normal((20, 2))
        f = problem.objective(X)
        if not values or f.min() <= np.concatenate(values).min():
            centre = X[int(np.argmin(f))]
        values.append(f)
    f = np.concatenate(values)
    assert problem.evaluations == f.size == 100
    precision = np.minimum.accumulate(f - problem.f_opt)
    expected = [int(np.argmax(precision <= t)) + 1 for t in TARGETS if precision[-1] <= t]
    final = problem.final_evaluation(np.zeros(2))
    assert final["runtimes"] == expected and len(expected) > 5
    assert final["best_precision"] == pytest.approx(precision[-1])
    assert np.all(f - problem.f_opt >= 0)  # f_opt is the minimum


def test_optimal_value_is_attained():
    problem = CocoProblem("bbob", 1, 3, 2, "ingo")  # the sphere: any point's precision is its distance^2 to x_opt
    f = problem.objective(np.zeros((1, 3)))
    assert f[0] - problem.f_opt > 0
    assert problem.final_evaluation(np.zeros(3))["coco_evaluations"] == 1


# ---------------------------------------------------------------------- claim checks
def runs(method, fractions, dim=10, function=15, nfev=1000):
    """Runs whose first k targets were reached, k = fraction * 51, one per instance."""
    out = []
    for instance, frac in enumerate(fractions, start=1):
        k = int(round(frac * TARGETS.size))
        out.append(Run("bbob", dim, function, method, instance, list(range(10, 10 * k + 1, 10)), nfev))
    return out


def test_solved_fraction_check_uses_a_bootstrap_interval():
    """The mean paired difference in solved fraction with its bootstrap interval over instances: clearly ahead is
    reproduced, clearly behind not; a noisy tie neither proves 'at least as good' nor 'better': inconclusive (the
    2-standard-error rule before it counted a tie as 'at least as good')."""
    rng = np.random.default_rng(0)
    base = rng.uniform(0.3, 0.6, 20)
    check = {"a": ["sabo"], "b": ["ingo"], "relation": ">="}
    ahead = Context(runs("sabo", base + 0.2) + runs("ingo", base))
    behind = Context(runs("sabo", base - 0.2) + runs("ingo", base))
    noisy_tie = Context(runs("sabo", base + rng.normal(0, 0.05, 20)) + runs("ingo", base))
    assert CHECKERS["solved_fraction"](check, ahead)[0] == REPRODUCED
    assert CHECKERS["solved_fraction"](check, behind)[0] == NOT_REPRODUCED
    verdict, _, measured, reason = CHECKERS["solved_fraction"](check, noisy_tie)
    assert verdict == INCONCLUSIVE and "reaches both sides of >= 0" in reason
    low, high = (float(x) for x in measured.split("(95% interval ")[1].split(")")[0].split(" to "))
    # about +-2 standard errors of a mean of 20 differences of spread 0.05 (width 0.045), not twice that
    assert low < 0 < high and high - low < 2 * 4 * 0.05 / np.sqrt(20)
    assert CHECKERS["solved_fraction"]({**check, "relation": ">"}, noisy_tie)[0] == INCONCLUSIVE
    assert CHECKERS["solved_fraction"]({**check, "relation": ">"}, ahead)[0] == REPRODUCED
    assert CHECKERS["solved_fraction"]({**check, "functions": [1]}, ahead)[0] == NOT_RUN
    assert CHECKERS["solved_fraction"]({**check, "suite": "bbob-noisy"}, ahead)[0] == NOT_RUN


def test_every_comparison_must_hold_together():
    """A claim over several dimensions is decided on the smallest difference, resampled jointly: one dimension
    behind makes it not reproduced, however far ahead the others are."""
    rng = np.random.default_rng(1)
    base = rng.uniform(0.3, 0.6, 10)
    mixed = Context(runs("sabo", base + 0.3, dim=2) + runs("ingo", base, dim=2)
                    + runs("sabo", base - 0.2, dim=5) + runs("ingo", base, dim=5))
    verdict, _, measured, _ = CHECKERS["solved_fraction"]({"a": ["sabo"], "b": ["ingo"]}, mixed)
    assert verdict == NOT_REPRODUCED and measured.startswith("smallest difference: -0.2")
    assert "1 reproduced, 1 not reproduced" in measured


def test_ert_and_the_ert_ratio_check():
    a = [Run("bbob", 5, 1, "sabo", i, [100, 300], 1000) for i in (1, 2)] + [Run("bbob", 5, 1, "sabo", 3, [200], 1000)]
    assert ert(a, 0) == pytest.approx((100 + 100 + 200) / 3)
    assert ert(a, 1) == pytest.approx((300 + 300 + 1000) / 2)   # the unsuccessful run counts its budget
    assert ert(a, 2) == np.inf
    b = [Run("bbob", 5, 1, "ingo", i, [50, 100], 1000) for i in (1, 2, 3)]
    check = {"a": "sabo", "b": "ingo", "range": "[0, 2]", "functions": [1]}
    verdict, _, measured, *_ = CHECKERS["ert_ratio"](check, Context(a + b))
    # ratios: 133.3 / 50 = 2.67 and 800 / 100 = 8: median above 2
    assert verdict == NOT_REPRODUCED and "median ratio 5.33" in measured
    fast = [Run("bbob", 5, 1, "sabo", i, [80, 150], 1000) for i in (1, 2, 3)]
    assert CHECKERS["ert_ratio"](check, Context(fast + b))[0] == REPRODUCED
    assert CHECKERS["ert_ratio"]({**check, "functions": [2]}, Context(fast + b))[0] == NOT_RUN


def test_an_ert_ratio_just_past_its_bound_is_inconclusive_when_the_instances_spread():
    """Issue 33: a median ERT ratio of 2.05 against 2 read as a flat 'not reproduced'. With instances that reach
    the target anywhere from 60 to 150 evaluations (mean 102.5, against 50) the interval reaches both sides of 2;
    the same ratio with no spread between instances is not reproduced."""
    b = [Run("bbob", 5, 1, "ingo", i, [50], 1000) for i in (1, 2, 3, 4)]
    spread = [Run("bbob", 5, 1, "sabo", i, [t], 1000) for i, t in zip((1, 2, 3, 4), (150, 60, 120, 80))]
    check = {"a": "sabo", "b": "ingo", "range": "[0, 2]", "functions": [1]}
    verdict, _, measured, reason = CHECKERS["ert_ratio"](check, Context(spread + b))
    assert verdict == INCONCLUSIVE and measured.startswith("median ratio 2.05 (95% interval ")
    assert reason.startswith("the 95% interval ") and reason.endswith(" reaches both sides of [0, 2]")
    steady = [Run("bbob", 5, 1, "sabo", i, [t], 1000) for i, t in zip((1, 2, 3, 4), (102, 103, 102, 103))]
    verdict, _, measured, reason = CHECKERS["ert_ratio"](check, Context(steady + b))
    assert verdict == NOT_REPRODUCED and reason == "median ratio 2.05, outside [0, 2]"
    # the resampled ERTs are COCO's on the drawn runs: drawing instance 2 four times gives 60 / 50
    from replication.bbob.report import erts

    assert erts(spread, np.array([[1, 1, 1, 1]]))[0, 0] == pytest.approx(60.0)
    assert erts(spread[:1] + [Run("bbob", 5, 1, "sabo", 9, [], 1000)], np.array([[0, 1]]))[0, 0] == \
        pytest.approx((150 + 1000) / 1)


# ---------------------------------------------------------------------- cocopp and the ci profile
def test_cocopp_reads_the_runs_coco_data_offline(tmp_path):
    configs = [c for c in ci_configs(functions=[1, 15]) if c.method in ("sabo", "cmaes")]
    records = [execute(c, tmp_path / "runs") for c in configs]
    written = run_cocopp(records, tmp_path / "runs", tmp_path / "out")
    folder = written["bbob"] / "all_methods"
    assert (written["bbob"] / "index.html").is_file()
    assert "all_methods/" in (written["bbob"] / "index.html").read_text()
    svg, = folder.glob("pprldmany_02D_noiselessall.svg")
    assert svg.stat().st_size > 0
    assert not list(written["bbob"].rglob("*.pdf")) and not list(written["bbob"].rglob("*.tex"))
    tables = (folder / "pptables.html").read_text()
    assert "f1" in tables and "f15" in tables
    # deterministic: the same records give the same files, byte for byte (tables' bootstrap ranges, SVG ids, dates)
    again = run_cocopp(records, tmp_path / "runs", tmp_path / "again")["bbob"]
    files = sorted(p.relative_to(written["bbob"]) for p in written["bbob"].rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    assert [f for f in files if (written["bbob"] / f).read_bytes() != (again / f).read_bytes()] == []


def test_report_without_coco_data_says_so(tmp_path):
    from replication.bbob.report import report

    params = ci_params(functions=[1], dims=[2])
    records = [execute(c, tmp_path / "runs") for c in study.configs(params) if c.method in ("sabo", "ingo")]
    outcome = report(params, records, tmp_path / "out", runs_dir=None)
    text = (tmp_path / "out" / "bbob.md").read_text()
    assert "cocopp was not run" in text and not (tmp_path / "out" / "bbob").exists()
    assert "COCO's evaluation count equals the engine's in every record: yes." in text
    assert "| bbob | 2 |" in text
    assert {c["id"] for c in outcome["claims"]} >= {"sabo_not_behind_ingo_on_global_structure"}
    # the verdicts name the functions they rest on: here f1 only, of the 24 or the f1-f5 their claims read
    checked = {c["id"]: c["operationalisation"] for c in outcome["claims"]}
    assert "(bbob; the 1 function run of 24 (f1); every dimension run)" in \
        checked["sabo_similar_to_ingo_on_all_functions"]
    assert "(bbob; f1 (f2, f3, f4, f5 not run); " in checked["sabo_at_most_twice_ingo_evaluations_on_separable"]
    assert "Profile **ci** runs a subset of the functions on bbob (1 of 24)" in text
    assert "Records: `bbob_runs.parquet` beside this page, one row per run." in text
    assert "diverged" not in text
    from replication.bbob.report import _coverage_lines

    broken = copy.deepcopy(records)
    broken[0]["result"]["status"] = "diverged"
    method = broken[0]["config"]["method"]
    n = sum(r["config"]["method"] == method for r in records)
    assert f"count): {method} 1 of {n} (bbob f1)." in "\n".join(_coverage_lines("ci", params["bbob"]["profiles"]["ci"],
                                                                                  broken))


@pytest.mark.slow
def test_ci_profile_through_the_command_line(tmp_path, capsys):
    common = ["--params", str(ROOT / "params.yaml"), "--profile", "ci", "--runs-dir", str(tmp_path / "runs")]
    assert main(["run", "bbob", *common, "--workers", "2", "--no-track", "--quiet"]) == 0
    expected = ROOT / "replication" / "bbob" / "ci_expected.json"
    out = tmp_path / "results"
    assert main(["report", "bbob", *common, "--out", str(out), "--no-track", "--check-claims", str(expected)]) == 0
    # what the check holds the study to: the solved percentage of every method (the ci claims are inconclusive)
    recorded = json.loads(expected.read_text())
    assert set(recorded["scores"]) == {f"bbob/d2/{m}" for m in ci_params()["bbob"]["methods"]}
    raised = {**recorded, "scores": {**recorded["scores"], "bbob/d2/cmaes": recorded["scores"]["bbob/d2/cmaes"]
                                     + recorded["score_tolerance"]["bbob/d2/cmaes"] + 1.0}}
    (tmp_path / "raised.json").write_text(json.dumps(raised))
    capsys.readouterr()
    assert main(["report", "bbob", *common, "--out", str(tmp_path / "again"), "--no-track", "--check-claims",
                 str(tmp_path / "raised.json")]) == 1
    [line] = [x for x in capsys.readouterr().err.splitlines() if x.startswith("CLAIM REGRESSION")]
    assert line.startswith("CLAIM REGRESSION: bbob/d2/cmaes: ")
    assert (out / "bbob" / "bbob" / "index.html").is_file()
    text = (out / "bbob.md").read_text()
    assert "![runtime ECDFs](figures/bbob_ecdf.png)" in text and (out / "figures" / "bbob_ecdf.png").is_file()
    for c in study.configs(ci_params()):
        assert load_record(tmp_path / "runs", c) is not None
        assert RunConfig.from_dict(c.to_dict()) == c
    # from its run table the page would lose its cocopp links: not replaced unasked
    again = ["report", "bbob", *common, "--out", str(out), "--no-track", "--from-table", str(out / "bbob_runs.parquet")]
    assert main(again) == 1
    assert "bbob_claims.json belongs to a report with cocopp's pages (a run table holds no COCO data), which this " \
           "one would lack; not replaced" in capsys.readouterr().err
    assert main([*again, "--force"]) == 0 and "cocopp was not run" in (out / "bbob.md").read_text()
    assert json.loads((out / "bbob_claims.json").read_text())["omits"] == [study.TABLE_OMITS]
