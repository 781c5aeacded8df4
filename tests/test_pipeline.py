"""dvc.yaml and params.yaml agree: one stage per (setting, method), every figure an output."""
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def load(name):
    return yaml.safe_load((ROOT / name).read_text())


def test_synthetic_matrix_covers_every_setting_and_method():
    dvc, params = load("dvc.yaml"), load("params.yaml")["synthetic"]
    matrix = dvc["stages"]["synthetic"]["matrix"]
    assert sorted(matrix["setting"]) == sorted(params["settings"]) == sorted(params["profiles"]["full"]["iterations"])
    assert sorted(matrix["method"]) == sorted(params["methods"])
    stage_params = dvc["stages"]["synthetic"]["params"]
    assert "synthetic.methods.${item.method}" in stage_params   # one method's change reruns only its stages
    assert not any(p == "synthetic" or p == "synthetic.methods" for p in stage_params)


def test_report_outputs_every_figure_of_the_full_profile():
    dvc, params = load("dvc.yaml"), load("params.yaml")["synthetic"]
    outs = {next(iter(o)) if isinstance(o, dict) else o for o in dvc["stages"]["synthetic_report"]["outs"]}
    for setting in params["profiles"]["full"]["iterations"]:
        assert f"results/figures/synthetic_{setting}.png" in outs
        assert f"results/figures/synthetic_{setting}_evals.png" in outs
    assert "results/synthetic.md" in outs


def test_reduced_profiles_only_name_known_settings():
    params = load("params.yaml")["synthetic"]
    for name, profile in params["profiles"].items():
        assert set(profile["iterations"]) <= set(params["settings"]), name


def test_image_matrix_covers_every_dimension_and_method():
    dvc, params = load("dvc.yaml"), load("params.yaml")["image"]
    matrix = dvc["stages"]["image"]["matrix"]
    assert sorted(matrix["setting"]) == sorted(params["dims"])
    assert sorted(matrix["method"]) == sorted(params["methods"])
    assert "image.methods.${item.method}" in dvc["stages"]["image"]["params"]
    assert "data/umap" in dvc["stages"]["image"]["deps"]


def test_report_stages_keep_the_old_report_while_they_run():
    """DVC deletes a stage's outputs before it runs, unless they persist; then `sabo-bench report`
    could not see the report it would replace, and a quick-profile `dvc exp run` would silently
    overwrite the committed full report."""
    dvc = load("dvc.yaml")
    reports = [name for name, stage in dvc["stages"].items() if " report " in f" {stage['cmd']} "]
    assert sorted(reports) == ["image_report", "prompt_report", "synthetic_report"]
    for name in reports:
        for out in dvc["stages"][name]["outs"]:
            (path, options), = out.items()
            assert options == {"cache": False, "persist": True}, (name, path)
        assert dvc["stages"][name]["cmd"].endswith("--out results")  # no --force: a refusal stops the stage
