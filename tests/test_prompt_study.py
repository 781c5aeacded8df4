"""The prompt-tuning study end to end, offline: configs, the problem, the engine, the CLI and the report.

A tiny RoBERTa and tokenizer (tests/tiny_roberta.py) are saved to a local directory, tiny
SST-2-schema data are prepared with BBT's few-shot split, and the study runs through
``sabo-bench run prompt`` and ``sabo-bench report prompt`` with a parameter file pointing at them.
"""
import json

import numpy as np
import pytest
import yaml

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from tiny_roberta import NEGATIVE, POSITIVE, tiny_model, tiny_tokenizer  # noqa: E402

import baselines  # noqa: E402
from replication import cli  # noqa: E402
from replication.config import RunConfig  # noqa: E402
from replication.engine import execute, record_path  # noqa: E402
from replication.prompt import study  # noqa: E402
from replication.prompt.data import TaskDataUnavailable, prepare_task  # noqa: E402
from replication.prompt.objective import PromptObjective  # noqa: E402
from replication.prompt.problem import PromptProblem, encode_task  # noqa: E402
from replication.prompt.report import TABLE2_METHODS, select  # noqa: E402
from replication.prompt.tasks import ZERO_SHOT  # noqa: E402
from replication.storage import read_json  # noqa: E402
from replication.studies import select as select_configs  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PARAMS = yaml.safe_load(open("params.yaml"))
K = 4
OFFSET = 100  # the tiny vocabulary has no ids 1000..1049


def with_profile(name, **prompt_overrides):
    p = json.loads(json.dumps(PARAMS))
    p["prompt"]["profile"] = name
    p["prompt"].update(prompt_overrides)
    return p


# -- configs ------------------------------------------------------------------------------------
def test_gpu_profile_is_the_papers_grid():
    cs = study.configs(with_profile("gpu"))
    grid = {"cmaes": 1, "mmes": 1, "bes": 12, "ingo": 4, "sabo": 16, "sabo_inverse": 16, "sabo_small_rho": 12,
            "turbo": 1, "gibo": 1}
    per_task = 3 * sum(grid.values()) * 3 + 1           # dims x configurations x seeds + zero-shot
    assert len(cs) == 6 * per_task
    assert len({c.hash for c in cs}) == len(cs)
    for method, n in grid.items():
        runs = [c for c in cs if c.method == method and c.problem["name"] == "rte" and c.setting == "d500"]
        assert len(runs) == 3 * n
        assert all(c.params["popsize"] == 100 and c.params["sigma0"] == 1.0 and c.budget == {"max_iter": 100}
                   for c in runs)
    sabo_rhos = {c.params["rho"] for c in cs if c.method == "sabo"}
    assert sabo_rhos == {10.0, 50.0, 100.0, 500.0}
    assert {c.params["rho_reading"] for c in cs if c.method == "sabo_inverse"} == {"inverse"}
    zero = [c for c in cs if c.method == ZERO_SHOT]
    assert sorted(c.problem["name"] for c in zero) == sorted(PARAMS["prompt"]["profiles"]["gpu"]["tasks"])
    assert all(c.budget == {"max_iter": 0} and c.problem["dim"] == 0 and c.params == {} for c in zero)


def test_projection_seed_is_shared_by_methods_and_differs_across_seeds():
    cs = select_configs(study.configs(with_profile("gpu")), functions=["mrpc"], settings=["d200"])
    by_seed = {}
    for c in cs:
        by_seed.setdefault(c.seed, set()).add(study.projection_seed(c))
    assert all(len(s) == 1 for s in by_seed.values())
    assert len({next(iter(s)) for s in by_seed.values()}) == 3
    # the device and the precision do not change A; the task and d do
    c = cs[0]
    for key, value in (("device", "cpu"), ("weights", "bf16"), ("backbone", "/elsewhere/roberta-large")):
        other = RunConfig.from_dict({**c.to_dict(), "problem": {**c.problem, key: value}})
        assert study.projection_seed(other) == study.projection_seed(c)
    for key, value in (("name", "rte"), ("dim", 500)):
        other = RunConfig.from_dict({**c.to_dict(), "problem": {**c.problem, key: value}})
        assert study.projection_seed(other) != study.projection_seed(c)


def test_offline_profile_runs_nothing_and_filters_narrow():
    assert study.configs(with_profile("offline")) == []
    cs = select_configs(study.configs(with_profile("gpu")), functions=["sst2"], methods=["ingo"], seeds=[1])
    assert {(c.problem["name"], c.method, c.seed) for c in cs} == {("sst2", "ingo", 1)} and len(cs) == 3 * 4


def test_bad_profile_settings_are_clear_errors():
    p = with_profile("gpu", selection="best_test")
    with pytest.raises(ValueError, match="prompt.selection must be one of"):
        study.configs(p)
    p = with_profile("smoke")
    p["prompt"]["profiles"]["smoke"]["methods"] = ["sabo", "tubro"]
    with pytest.raises(ValueError, match=r"unknown method\(s\) \['tubro'\]"):
        study.configs(p)


# -- the problem --------------------------------------------------------------------------------
def sentiment_rows(split):
    rows = [{"sentence": s, "label": 1} for s in POSITIVE] + [{"sentence": s, "label": 0} for s in NEGATIVE]
    if split == "validation":  # a test set unlike the training rows
        rows = [{"sentence": r["sentence"] + " indeed", "label": r["label"]} for r in rows]
    return rows


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A saved tiny backbone and prepared tiny SST-2 data for seeds 0 and 1."""
    root = tmp_path_factory.mktemp("prompt")
    model, tok = tiny_model(initializer_range=0.3), tiny_tokenizer()
    model.save_pretrained(root / "model")
    tok.save_pretrained(root / "model")
    for seed in (0, 1):
        prepare_task("sst2", seed, root / "data", k=K, loader=lambda task, split: sentiment_rows(split))
    return root, model, tok


def rows_of(root, seed=0):
    from replication.prompt.data import read_split

    return {s: read_split(root / "data" / "sst2" / f"seed{seed}" / f"{s}.jsonl") for s in ("train", "dev", "test")}


def test_problem_tracks_the_best_dev_mean_and_restores_it(tiny):
    root, model, tok = tiny
    enc = encode_task(tok, "sst2", rows_of(root), placeholder_offset=OFFSET)
    assert [len(enc[s]) for s in ("train", "dev", "test")] == [2 * K, 2 * K, 20]
    problem = PromptProblem.build(model, tok, "sst2", enc, dim=8, projection_seed=3)
    assert problem.dim == 8 and np.array_equal(problem.x0, np.zeros(8))
    means = np.random.default_rng(0).standard_normal((6, 8)) * 3
    devs = [problem.metrics(m) for m in means[:3]]
    state = problem.get_state()
    devs += [problem.metrics(m) for m in means[3:]]
    key = [(d["dev_metric"], -d["dev_loss"]) for d in devs]
    best = max(range(6), key=lambda i: (key[i], -i))
    ev = problem.final_evaluation(means[-1])
    obj = problem.prompt_objective
    assert ev["best_dev_point"] == best and ev["best_dev_metric"] == devs[best]["dev_metric"]
    assert ev["test_metric_best_dev"] == obj.scores(means[best], problem._test)["metric"]
    assert ev["test_metric_final"] == obj.scores(means[-1], problem._test)["metric"]
    assert ev["test_loss_final"] == pytest.approx(obj.scores(means[-1], problem._test)["loss"], rel=1e-12)

    again = PromptProblem.build(model, tok, "sst2", enc, dim=8, projection_seed=3)
    again.set_state(state)
    for m in means[3:]:
        again.metrics(m)
    assert again.final_evaluation(means[-1]) == ev


def test_metrics_are_the_cross_entropy_and_accuracy_of_the_mean(tiny):
    root, model, tok = tiny
    enc = encode_task(tok, "sst2", rows_of(root), placeholder_offset=OFFSET)
    problem = PromptProblem.build(model, tok, "sst2", enc, dim=8, projection_seed=3)
    z = np.random.default_rng(1).standard_normal(8)
    m = problem.metrics(z)
    obj = problem.prompt_objective
    assert m["train_loss"] == pytest.approx(obj.losses(z[None])[0], rel=1e-6)
    assert m["train_metric"] == obj.evaluate(z)
    assert m["dev_metric"] == obj.evaluate(z, problem._dev)


def test_zero_shot_problem_has_no_prompt_slots(tiny):
    root, model, tok = tiny
    enc = encode_task(tok, "sst2", rows_of(root), prompt=False)
    prompted = encode_task(tok, "sst2", rows_of(root), placeholder_offset=OFFSET)
    for plain, slots in zip(enc["test"].input_ids, prompted["test"].input_ids):
        assert list(plain) == [slots[0], *slots[1 + 50:]]       # the same input without the 50 slots
    # an input dropped for its prompted length is dropped by the zero-shot encoding too
    lengths = prompted["test"].lengths
    cut = int(np.sort(lengths)[-3])                             # drops the two longest prompted inputs
    short = encode_task(tok, "sst2", rows_of(root), placeholder_offset=OFFSET, max_length=cut - 1)
    short_plain = encode_task(tok, "sst2", rows_of(root), prompt=False, max_length=cut - 1)
    assert short["test"].n_dropped >= 2 and np.array_equal(short["test"].kept, short_plain["test"].kept)
    problem = PromptProblem.build(model, tok, "sst2", enc, dim=None)
    assert problem.dim == 0 and problem.x0.shape == (0,)
    with pytest.raises(ValueError, match="zero-shot"):
        problem.objective(np.zeros((2, 4)))
    ev = problem.final_evaluation(problem.x0)
    # by hand: the model's label-word logits at <mask>, unprompted
    label_ids = [tok.encode(w, add_special_tokens=False)[0] for w in ("bad", "great")]
    correct = 0
    with torch.inference_mode():
        for ids, y in zip(enc["test"].input_ids, enc["test"].labels):
            ids_t = torch.as_tensor(ids)[None]
            logits = model(input_ids=ids_t).logits[0, int(np.flatnonzero(ids == tok.mask_token_id)[0])]
            correct += int(int(torch.argmax(logits[label_ids])) == y)
    assert ev["test_metric_final"] == correct / len(enc["test"])


def test_split_scores_do_not_disturb_the_objective_counters(tiny):
    root, model, tok = tiny
    enc = encode_task(tok, "sst2", rows_of(root), placeholder_offset=OFFSET)
    problem = PromptProblem.build(model, tok, "sst2", enc, dim=8, projection_seed=3)
    obj: PromptObjective = problem.prompt_objective
    problem.metrics(np.ones(8))
    problem.final_evaluation(np.ones(8))
    assert obj.n_evaluations == 0 and obj.n_calls == 0


# -- the study through the engine and the CLI ----------------------------------------------------
@pytest.fixture
def study_params(tiny, tmp_path, monkeypatch):
    root, _, _ = tiny
    monkeypatch.setenv(study.DATA_ENV, str(root / "data"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    study._backbone.cache_clear()
    study._encoded.cache_clear()
    p = with_profile("tiny", backbone=str(root / "model"), device="cpu", k_shot=K, placeholder_offset=OFFSET,
                     popsize=6, dims={"d8": 8})
    p["prompt"]["profiles"]["tiny"] = {"tasks": ["sst2"], "seeds": [0, 1], "iterations": 4, "dims": ["d8"],
                                       "methods": ["sabo", "ingo"]}
    p["prompt"]["methods"]["sabo"] = {"lr": 0.5, "rho": [0.1, 1.0]}
    p["prompt"]["methods"]["ingo"] = {"lr": 0.5}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(p))
    return path, p


def test_cli_runs_the_study_and_reports_it(study_params, tmp_path, capsys):
    path, p = study_params
    runs = tmp_path / "runs"
    args = ["--params", str(path), "--runs-dir", str(runs)]
    assert cli.main(["run", "prompt", *args, "--no-track", "--quiet"]) == 0
    configs = study.configs(p)
    assert len(configs) == 1 + (2 + 1) * 2
    records = [read_json(record_path(runs, c)) for c in configs]
    for c, r in zip(configs, records):
        res = r["result"]
        assert res["status"] == "completed"
        ev = res["final_evaluation"]
        if c.method == ZERO_SHOT:
            assert res["curve"]["nit"] == [0] and res["evals_per_iteration"] == 0
            assert 0.0 <= ev["test_metric_final"] <= 1.0
            continue
        curve = res["curve"]
        assert curve["nit"] == [0, 1, 2, 3, 4]                       # a point every iteration at T = 4
        for key in ("train_loss", "train_metric", "dev_loss", "dev_metric"):
            assert len(curve[key]) == 5
        k = int(ev["best_dev_point"])
        assert curve["dev_metric"][k] == max(curve["dev_metric"]) == ev["best_dev_metric"]
        if k == 4:
            assert ev["test_metric_best_dev"] == ev["test_metric_final"]
    mtimes = [record_path(runs, c).stat().st_mtime_ns for c in configs]
    assert cli.main(["run", "prompt", *args, "--no-track", "--quiet"]) == 0      # idempotent
    assert [record_path(runs, c).stat().st_mtime_ns for c in configs] == mtimes

    out = tmp_path / "results"
    assert cli.main(["report", "prompt", *args, "--out", str(out), "--no-track"]) == 0
    md = (out / "prompt_tuning.md").read_text()
    selected = select(records, "best_dev")
    sabo = selected[("sst2", "d8", "sabo")]
    assert f"**{sabo['mean']:.2f} ± {sabo['std']:.2f}** " in md
    assert "paper 87.88 ± 0.53" in md and "paper 79.82" in md
    assert "not in the active profile `tiny`" in md
    unregistered = [m for m in TABLE2_METHODS if m not in baselines.REGISTRY]
    assert ("not implemented in this suite yet" in md) == bool(unregistered)
    claims = read_json(out / "prompt_tuning_claims.json")["claims"]
    assert {c["id"]: c["verdict"] for c in claims}["sabo_outperforms_bo"] == "not run"


def test_selection_picks_the_best_mean_dev_configuration(study_params, tmp_path):
    path, p = study_params
    runs = tmp_path / "runs"
    configs = [c for c in study.configs(p) if c.method == "sabo"]
    records = [execute(c, runs) for c in configs]
    for rule, dev_key, test_key in (("best_dev", "best_dev_metric", "test_metric_best_dev"),
                                    ("final", None, "test_metric_final")):
        by_rho = {}
        for r in records:
            ev, final = r["result"]["final_evaluation"], r["result"]["final"]
            dev = ev[dev_key] if dev_key else final["dev_metric"]
            by_rho.setdefault(r["config"]["params"]["rho"], []).append((dev, ev[test_key]))
        best_rho = max(by_rho, key=lambda rho: np.mean([d for d, _ in by_rho[rho]]))
        cell = select(records, rule)[("sst2", "d8", "sabo")]
        assert cell["params"]["rho"] == best_rho
        tests = [t for _, t in by_rho[best_rho]]
        assert cell["mean"] == pytest.approx(100 * np.mean(tests))
        assert cell["std"] == pytest.approx(100 * np.std(tests, ddof=1))


def test_a_diverged_run_is_reported_as_diverged_not_scored(study_params, tmp_path):
    """Marking the best configuration's first seed diverged: that seed enters no mean, the configuration
    ranks below fully completed ones, and the cell says how many seeds diverged."""
    import copy

    from replication.prompt.report import _cell

    path, p = study_params
    records = [execute(c, tmp_path / "runs") for c in study.configs(p) if c.method == "sabo"]
    best = select(records, "best_dev")[("sst2", "d8", "sabo")]
    hurt = copy.deepcopy(records)
    victim = next(r for r in hurt if r["config"]["params"] == best["params"])
    victim["result"]["status"] = "diverged"
    cell = select(hurt, "best_dev")[("sst2", "d8", "sabo")]
    assert cell["params"] != best["params"] and cell["diverged"] == 0
    only = [r for r in hurt if r["config"]["params"] == best["params"]]
    alone = select(only, "best_dev")[("sst2", "d8", "sabo")]
    assert alone["diverged"] == 1 and alone["seeds"] == len(only)
    assert f"1/{len(only)} seeds diverged)" in _cell(alone, None, None)
    for r in only:
        r["result"]["status"] = "diverged"
    gone = select(only, "best_dev")[("sst2", "d8", "sabo")]
    assert np.isnan(gone["mean"]) and _cell(gone, None, None) == f"diverged ({len(only)}/{len(only)} seeds)"


def test_interrupted_run_resumes_to_the_same_result(study_params, tmp_path):
    from helpers import deterministic_part

    _, p = study_params
    config = next(c for c in study.configs(p) if c.method == "sabo")
    whole = execute(config, tmp_path / "whole")

    class Interrupt(Exception):
        pass

    def stop_at_2(nit, _max_iter):
        if nit == 2:
            raise Interrupt

    runs = tmp_path / "resumed"
    with pytest.raises(Interrupt):
        execute(config, runs, checkpoint_every_iters=1, progress=stop_at_2)
    assert not record_path(runs, config).exists()
    resumed = execute(config, runs)
    assert resumed["provenance"]["resumed"] == 1
    assert deterministic_part(resumed) == deterministic_part(whole)


def test_records_are_tracked_with_their_test_metrics(study_params, tmp_path):
    pytest.importorskip("mlflow")
    from replication.tracking import Tracker

    _, p = study_params
    configs = [c for c in select_configs(study.configs(p), seeds=[0]) if c.method in (ZERO_SHOT, "ingo")]
    records = [execute(c, tmp_path / "runs") for c in configs]
    tracker = Tracker(f"sqlite:///{tmp_path}/mlflow.db")
    assert all(tracker.log_record(r, profile="smoke") for r in records)
    client = tracker.client
    exp = client.get_experiment_by_name("prompt")
    for r in records:
        run = client.search_runs([exp.experiment_id],
                                 filter_string=f"tags.sabo_bench_config_hash = '{r['config_hash']}'")[0]
        ev = r["result"]["final_evaluation"]
        assert run.data.metrics["final_eval_test_metric_final"] == ev["test_metric_final"]
        assert run.data.metrics["final_eval_test_metric_best_dev"] == ev["test_metric_best_dev"]
        assert "f_best" not in run.data.metrics or r["config"]["method"] != ZERO_SHOT  # NaN: not logged


def test_fp32_weights_are_the_default_and_bf16_close_to_them(study_params):
    """fp32 (the default) vs bf16 weights: a different config, losses within 5e-2 relative (3 candidates)."""
    _, p = study_params
    config = next(c for c in study.configs(p) if c.method == "ingo")
    assert config.problem["weights"] == "fp32"
    assert {k: config.problem[k] for k in ("attention", "bucketing", "compile")} == \
        {"attention": "varlen", "bucketing": True, "compile": True}
    bf16 = RunConfig.from_dict({**config.to_dict(), "problem": {**config.problem, "weights": "bf16"}})
    assert bf16.hash != config.hash
    Z = np.random.default_rng(0).standard_normal((3, 8)) * 3
    ref = study.make_problem(config)
    ref_loss = ref.objective(Z)
    assert ref.prompt_objective.model.dtype == torch.float32
    low = study.make_problem(bf16)
    obj = low.prompt_objective
    assert obj.model.dtype == torch.bfloat16 and obj.autocast is False and obj.packed
    assert low.objective(Z) == pytest.approx(ref_loss, rel=5e-2)       # bf16 keeps ~3 significant digits
    with pytest.raises(ValueError, match=r"prompt.weights must be one of \('fp32', 'bf16'\)"):
        study.configs(with_profile("gpu", weights="fp16"))
    with pytest.raises(ValueError, match=r"prompt.attention must be one of \('sdpa', 'eager', 'varlen'\)"):
        study.configs(with_profile("gpu", attention="flash"))
    with pytest.raises(ValueError, match="prompt.bucketing must be true or false"):
        study.configs(with_profile("gpu", bucketing="yes"))


def test_execution_options_reach_the_objective_and_old_configs_run_as_before(study_params):
    _, p = study_params
    config = next(c for c in study.configs(p) if c.method == "ingo")
    eager = RunConfig.from_dict({**config.to_dict(), "problem": {**config.problem, "attention": "eager",
                                                                  "bucketing": False, "weights": "fp32"}})
    obj = study.make_problem(eager).prompt_objective
    assert obj.model.config._attn_implementation == "eager" and not obj.bucketing
    # a config written before the keys existed: fp32 as given, transformers' default attention, no bucketing
    old = {k: v for k, v in config.problem.items() if k not in ("attention", "bucketing", "compile")}
    obj = study.make_problem(RunConfig.from_dict({**config.to_dict(), "problem": {**old, "weights": "fp32"}})) \
        .prompt_objective
    assert obj.model.config._attn_implementation == "sdpa" and not obj.bucketing
    Z = np.random.default_rng(1).standard_normal((4, 8)) * 3
    np.testing.assert_allclose(study.make_problem(eager).objective(Z), obj.losses(Z), rtol=1e-5)
    # varlen: packed rows through the packed encoder (compiled when compile is set), the same losses
    for compiled in (False, True):
        varlen = RunConfig.from_dict({**config.to_dict(), "problem": {**config.problem, "attention": "varlen",
                                                                       "weights": "fp32", "compile": compiled}})
        assert (varlen.hash == config.hash) is compiled        # the default: varlen, compiled, fp32
        packed = study.make_problem(varlen).prompt_objective
        assert packed.packed and packed._compile_packed is compiled
        assert packed.model.config._attn_implementation == "sdpa"
        np.testing.assert_allclose(packed.losses(Z), obj.losses(Z), rtol=1e-5)


def test_the_bo_baselines_compute_on_the_studys_device(study_params, tmp_path, monkeypatch):
    """prompt.device reaches TuRBO-1's and GIBO's constructors (their GPs), through the config and the engine;
    the other methods' parameters (so their config hashes and records) do not change."""
    pytest.importorskip("botorch")
    from replication import engine

    _, p = study_params
    p["prompt"]["profiles"]["tiny"].update(methods=["turbo", "gibo", "ingo"], seeds=[0], iterations=1)
    p["prompt"]["methods"]["gibo"] = {"acq_maxiter": 0}  # cheap: the device is what this test follows
    configs = [c for c in study.configs(p) if c.method != ZERO_SHOT]
    assert {c.method: c.params.get("device") for c in configs} == {"turbo": "cpu", "gibo": "cpu", "ingo": None}
    built, original = {}, baselines.make

    def make(name, **kwargs):
        opt = original(name, **kwargs)
        built[name] = opt.state_dict()["config"].get("device")
        return opt

    monkeypatch.setattr(engine.baselines, "make", make)
    for c in configs:
        execute(c, tmp_path / "runs")
    assert built == {"turbo": "cpu", "gibo": "cpu", "ingo": None}
    # on CUDA (no GPU needed to build the configs): "cuda", the worker's pinned device, for both
    p["prompt"]["device"] = "cuda"
    assert {c.method: c.params.get("device") for c in study.configs(p) if c.method != ZERO_SHOT} == \
        {"turbo": "cuda", "gibo": "cuda", "ingo": None}
    ingo = next(c for c in configs if c.method == "ingo")
    assert ingo.params == {"sigma0": 1.0, "popsize": 6, "lr": 0.5}


def test_cuda_device_without_a_gpu_is_a_clear_error(study_params, tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    path, p = study_params
    p["prompt"]["device"] = "cuda"
    path.write_text(yaml.safe_dump(p))
    rc = cli.main(["run", "prompt", "--params", str(path), "--runs-dir", str(tmp_path / "runs"), "--no-track",
                   "--quiet"])
    assert rc == 2 and "prompt.device is 'cuda' but torch sees no CUDA device" in capsys.readouterr().err


def test_missing_prepared_data_is_a_clear_error(study_params, tmp_path, monkeypatch, capsys):
    path, p = study_params
    monkeypatch.setenv(study.DATA_ENV, str(tmp_path / "empty"))
    config = next(c for c in study.configs(p) if c.method == "ingo")
    with pytest.raises(TaskDataUnavailable, match=r"sabo-bench prepare prompt.*SABO_BENCH_PROMPT_DATA"):
        study.make_problem(config)
    # the command line prints the message, no traceback, exit status 2
    rc = cli.main(["run", "prompt", "--params", str(path), "--runs-dir", str(tmp_path / "runs"), "--no-track",
                   "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and "error: no prepared data for task 'sst2'" in err and "Traceback" not in err


def test_missing_backbone_stops_the_cli_with_its_message(study_params, tmp_path, capsys):
    path, p = study_params
    p["prompt"]["backbone"] = str(tmp_path / "no-such-model")
    path.write_text(yaml.safe_dump(p))
    study._backbone.cache_clear()
    rc = cli.main(["run", "prompt", "--params", str(path), "--runs-dir", str(tmp_path / "runs"), "--no-track",
                   "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "no-such-model' is unavailable: that path does not exist" in err
    assert not list((tmp_path / "runs").rglob("*.lock"))  # the run never started: no lock file left behind


def test_offline_profile_pipeline_commands_succeed_with_nothing_to_do(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(study.DATA_ENV, str(tmp_path / "data"))
    args = ["--runs-dir", str(tmp_path / "runs")]
    assert cli.main(["prepare", "prompt"]) == 0
    assert read_json(tmp_path / "data" / "prepared.json")["prepared"] == []
    assert cli.main(["run", "prompt", *args, "--no-track", "--quiet"]) == 2          # nothing to run is an error
    assert cli.main(["run", "prompt", *args, "--no-track", "--quiet", "--allow-empty"]) == 0  # unless allowed
    assert (tmp_path / "runs" / "prompt").is_dir()
    assert cli.main(["report", "prompt", *args, "--out", str(tmp_path / "res"), "--no-track"]) == 0
    md = (tmp_path / "res" / "prompt_tuning.md").read_text()
    # per task: zero-shot and 5 methods x 3 d of Table 1, zero-shot and each registered method x 3 d of Table 2
    table2 = sum(m in baselines.REGISTRY for m in TABLE2_METHODS)
    assert "No prompt run has been made here" in md and md.count("not run (a)") == 6 * (1 + 15 + 1 + 3 * table2)
