"""dvc.yaml and params.yaml agree: one stage per (setting, method), every figure an output; code is a
dependency; each report stage declares the run table, metrics and curves its report writes; and DVC
itself (its Python API, on a copy of the pipeline) finds the stages that a code or parameter
change affects, and no others."""
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def load(name):
    return yaml.safe_load((ROOT / name).read_text())


def body(stage: dict) -> dict:
    """A stage's definition (a foreach stage's under ``do``)."""
    return stage.get("do", stage)


def test_synthetic_stages_cover_every_setting_method_and_extra_method():
    """One stage per (setting, paper method), and per (setting, extra method) of any profile."""
    dvc, params = load("dvc.yaml"), load("params.yaml")["synthetic"]
    stage = dvc["stages"]["synthetic"]
    assert sorted(params["settings"]) == sorted(params["profiles"]["full"]["iterations"])
    expected = {f"{s}-{m}": {"setting": s, "method": m, "section": "methods"}
                for s in params["settings"] for m in params["methods"]}
    for profile in params["profiles"].values():
        for method, where in (profile.get("extra_methods") or {}).items():
            expected.update({f"{s}-{method}": {"setting": s, "method": method, "section": "extra_methods"}
                             for s in where})
    assert stage["foreach"] == expected
    assert any(item["section"] == "extra_methods" for item in expected.values())  # the quick profile's BO runs
    assert "--allow-empty" in stage["do"]["cmd"].split()  # an extra method outside its profile runs nothing
    stage_params = stage["do"]["params"]
    assert "synthetic.${item.section}.${item.method}" in stage_params   # one method's change reruns only its stages
    assert not any(p in ("synthetic", "synthetic.methods", "synthetic.extra_methods") for p in stage_params)


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
    could not see the report it would replace, and a quick-profile `dvc repro` would silently
    overwrite the committed full report."""
    dvc = load("dvc.yaml")
    reports = [name for name, stage in dvc["stages"].items() if " report " in f" {body(stage)['cmd']} "]
    assert sorted(reports) == ["bbob_report", "image_report", "prompt_report", "synthetic_report"]
    for name in reports:
        for out in [*dvc["stages"][name]["outs"], *dvc["stages"][name]["metrics"]]:
            (path, options), = out.items()
            assert options == {"cache": False, "persist": True}, (name, path)
        assert dvc["stages"][name]["cmd"].endswith("--out results")  # no --force: a refusal stops the stage


RUN_STAGES = ("synthetic", "image", "prompt", "bbob")
CODE = ("sabo", "baselines", "replication/engine.py", "replication/config.py", "replication/curve.py")


def report_stages(dvc) -> dict[str, str]:
    """report stage -> the study its command reports."""
    return {name: stage["cmd"].split()[2] for name, stage in dvc["stages"].items()
            if body(stage)["cmd"].startswith("sabo-bench report ")}


def test_run_stages_depend_on_their_code():
    """Editing sabo/sabo.py (or any optimizer, or the engine) must make the run stages out of date;
    until then only sabo/__init__.py (the version) was a dependency."""
    dvc = load("dvc.yaml")
    for name in RUN_STAGES:
        deps = body(dvc["stages"][name])["deps"]
        assert set(CODE) <= set(deps), name
        assert any(d.startswith(f"replication/{name}/") for d in deps), name
        assert all((ROOT / d).exists() for d in deps if not d.startswith(("runs/", "data/"))), name
    ignored = (ROOT / ".dvcignore").read_text().split()
    assert "__pycache__/" in ignored and "*.pyc" in ignored  # bytecode must not change the directory hashes


def test_report_stages_declare_the_table_metrics_and_curves_the_report_writes():
    from replication.params import read_params
    from replication.studies import get_study, optional_hook

    dvc, params = load("dvc.yaml"), read_params(ROOT / "params.yaml")
    declared_outs = set()
    for name, study_name in report_stages(dvc).items():
        stage, study = dvc["stages"][name], get_study(study_name)
        report = study.REPORT_NAME
        outs = {next(iter(o)) for o in stage["outs"]}
        declared_outs |= outs
        assert [next(iter(m)) for m in stage["metrics"]] == [f"results/{report}_metrics.json"], name
        assert f"results/{report}_runs.parquet" in outs, name
        plots_curves = optional_hook(study, "outcomes")(params, []).get("curves") is not None
        assert (f"results/{report}_curves.csv" in outs) == plots_curves, name
        assert {"replication/outcomes.py", "replication/table.py", f"replication/{study_name}/study.py"} <= set(
            stage["deps"]), name
    assert set(dvc["plots"]) <= declared_outs  # every plot is a figure a report stage writes (tests/test_dvc_views.py)


def readme_quick_command(text: str) -> list[str]:
    """The command of docs/studies/index.md that runs the quick synthetic profile under DVC once params.yaml selects
    it, as argv."""
    commands = re.findall(r"`synthetic\.profile: quick` in `params\.yaml`,\s+`(dvc repro [^`]*)`", text)
    assert commands and len(set(commands)) == 1, commands
    return commands[0].split()


@pytest.fixture(scope="module")
def pipeline_copy(tmp_path_factory):
    """A DVC repository (no git) holding this pipeline and its code, every stage used below
    committed with empty outputs: DVC's view of 'up to date' without running anything."""
    from dvc.repo import Repo

    root = tmp_path_factory.mktemp("pipeline")
    for name in ("dvc.yaml", "params.yaml", ".dvcignore"):
        shutil.copy(ROOT / name, root)
    for name in ("sabo", "baselines", "replication"):
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    cwd = Path.cwd()
    os.chdir(root)  # DVC resolves stage names against the working directory's dvc.yaml: never this checkout's
    repo = Repo.init(root, no_scm=True)
    stages = {s.name: s for s in repo.index.stages}
    targets = ["synthetic@d200_N50-ingo", "synthetic@d200_N100-sabo", "image_features", "image@d100-sabo",
               "prompt_data", "prompt"]
    for name in targets:
        for out in stages[name].outs:
            Path(out.fs_path).mkdir(parents=True, exist_ok=True)
    for name in targets:
        repo.commit(name, force=True)
    assert repo.status(targets) == {}
    try:
        yield root, repo, targets
    finally:
        repo.close()
        os.chdir(cwd)


def test_a_synthetic_parameter_change_touches_only_synthetic_stages_and_the_readme_command_runs_only_them(
        pipeline_copy):
    root, repo, targets = pipeline_copy
    params = root / "params.yaml"
    before = params.read_text()
    params.write_text(before.replace("\n  profile: full\n", "\n  profile: quick\n", 1))  # synthetic's profile
    try:
        changed = repo.status(targets)
        assert sorted(changed) == ["synthetic@d200_N100-sabo", "synthetic@d200_N50-ingo"]
        for name in changed:
            assert changed[name] == [{"changed deps": {"params.yaml": {"synthetic.profile": "modified"}}}]
        argv = readme_quick_command((ROOT / "docs" / "studies" / "index.md").read_text())
        assert argv[:2] == ["dvc", "repro"] and argv[2:]
        would_run = repo.reproduce(argv[2:], dry=True)
        assert len(would_run) == 27 and {s.addressing.split("@")[0] for s in would_run} == {"synthetic"}
        assert {"synthetic@d200_N100-turbo", "synthetic@d200_N100-gibo"} <= {s.addressing for s in would_run}
    finally:
        params.write_text(before)


def test_a_code_change_makes_the_run_stages_out_of_date_and_bytecode_does_not(pipeline_copy):
    root, repo, targets = pipeline_copy
    (root / "sabo" / "__pycache__").mkdir(exist_ok=True)
    (root / "sabo" / "__pycache__" / "sabo.cpython-311.pyc").write_bytes(b"bytecode")
    assert repo.status(targets) == {}
    runs = [t for t in targets if "@" in t or t == "prompt"]
    for path in ("sabo/sabo.py", "baselines/bes.py", "replication/engine.py"):
        source = root / path
        text = source.read_text()
        source.write_text(text + "# an edit\n")
        try:
            changed = repo.status(targets)
            assert sorted(changed) == sorted(runs), path  # not the data preparation stages
            dep = path if path.endswith("engine.py") else path.split("/")[0]
            for name in runs:
                assert changed[name] == [{"changed deps": {dep: "modified"}}], (path, name)
        finally:
            source.write_text(text)
    assert repo.status(targets) == {}


def test_an_experiment_keeps_the_records_dvc_lock_does_not_list(tmp_path):
    """`dvc exp run -S synthetic.profile=...` restores a stage's outputs as dvc.lock lists them before its command
    runs, deleting the records written outside DVC (here by `sabo-bench run --profile tiny`): they were computed
    again, silently, exit status 0. Each record now has a second name outside the stage's outputs, from which
    the stage's `sabo-bench run` puts it back: the records after the experiment are the very same files."""
    import subprocess
    import sys

    from helpers import tiny_params

    pytest.importorskip("dvc")
    if shutil.which("git") is None:
        pytest.skip("DVC experiments need git")
    params = tiny_params(methods=("ingo",))
    params["synthetic"]["profile"] = "full"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    run = [sys.executable, "-m", "replication.cli", "run", "synthetic", "--runs-dir", "runs", "--no-track", "--quiet"]
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"ingo": {
        "cmd": " ".join(run), "params": ["synthetic.profile"],
        "outs": [{"runs/synthetic/d10_N6/ingo": {"persist": True}}]}}}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "DVC_NO_ANALYTICS": "1", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}

    def sh(*argv):
        done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, (argv, done.stdout, done.stderr)
        return done

    dvc = [sys.executable, "-m", "dvc"]
    sh("git", "init", "-q")
    sh(*dvc, "init", "-q")
    shutil.copy(ROOT / ".gitignore", tmp_path)  # this repository's: records are not git's
    sh("git", "add", "-A")
    sh("git", "commit", "-qm", "pipeline")
    sh(*dvc, "repro", "-q")  # the full profile's 2 records, in dvc.lock
    sh("git", "add", "-A")
    sh("git", "commit", "-qm", "full profile")
    sh(*run, "--profile", "tiny")  # 4 more, outside DVC
    outs = tmp_path / "runs" / "synthetic" / "d10_N6" / "ingo"
    before = {p.name: p.read_bytes() for p in outs.glob("*.json")}
    assert len(before) == 6
    sh(*dvc, "exp", "run", "-q", "-S", "synthetic.profile=tiny")
    after = {p.name: p.read_bytes() for p in outs.glob("*.json")}
    assert after == before  # not one record computed again (a new one has new times in its provenance)
