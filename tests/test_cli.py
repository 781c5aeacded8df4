"""The sabo-bench command line on a tiny parameter file."""
import subprocess
import sys

import pytest
import yaml
from helpers import tiny_params

from replication.cli import main

TINY = tiny_params()


@pytest.fixture
def params(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(TINY))
    return str(path)


def test_help_names_every_command():
    out = subprocess.run([sys.executable, "-m", "replication.cli", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    for command in ("run", "run-one", "list", "prepare", "report", "track"):
        assert command in out.stdout


def test_run_list_report_cycle(tmp_path, params, capsys):
    runs = str(tmp_path / "runs")
    common = ["--params", params, "--runs-dir", runs]
    assert main(["list", "synthetic", *common, "--summary"]) == 0
    assert "8 pending" in capsys.readouterr().out
    assert main(["run-one", "synthetic", *common, "--method", "sabo", "--function", "levy", "--seed", "1",
                 "--no-track", "--quiet"]) == 0
    assert "d10_N6/levy/sabo/seed1: completed" in capsys.readouterr().out
    assert main(["run", "synthetic", *common, "--workers", "2", "--no-track", "--quiet"]) == 0
    assert "8 runs finished" in capsys.readouterr().out
    assert main(["list", "synthetic", *common, "--summary"]) == 0
    assert "8 completed" in capsys.readouterr().out
    out_dir = tmp_path / "results"
    assert main(["report", "synthetic", *common, "--out", str(out_dir), "--no-track"]) == 0
    md = (out_dir / "synthetic.md").read_text()
    assert "profile **tiny**" in md and "## Claims of the paper" in md
    assert (out_dir / "figures" / "synthetic_d10_N6.png").stat().st_size > 10_000
    assert (out_dir / "figures" / "synthetic_d10_N6_evals.png").exists()


def test_run_one_refuses_an_ambiguous_selection(tmp_path, params, capsys):
    assert main(["run-one", "synthetic", "--params", params, "--runs-dir", str(tmp_path), "--method", "sabo",
                 "--no-track"]) == 1
    assert "matches 4 runs" in capsys.readouterr().err


def test_unknown_profile_is_a_clear_error(tmp_path, params, capsys):
    assert main(["list", "synthetic", "--params", params, "--profile", "huge", "--runs-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--profile 'huge'" in err and "full, tiny" in err and "Traceback" not in err


def test_every_registered_study_fulfils_the_study_protocol():
    from replication.studies import STUDIES, Study, get_study

    for name in STUDIES:
        assert isinstance(get_study(name), Study)


def test_a_module_missing_part_of_the_contract_is_refused(monkeypatch):
    import types

    from replication import studies

    fake = types.ModuleType("fake_study")
    fake.configs = lambda params: []
    monkeypatch.setitem(sys.modules, "fake_study", fake)
    monkeypatch.setitem(studies.STUDIES, "fake", "fake_study")
    with pytest.raises(TypeError, match="missing make_problem, cost, report"):
        studies.get_study("fake")
    assert studies.optional_hook(studies.get_study("synthetic"), "prepare") is None
    with pytest.raises(ValueError, match="not an optional hook"):
        studies.optional_hook(studies.get_study("synthetic"), "report")


def test_select_filters_on_setting_method_seed_and_problem_name():
    from replication.studies import get_study, select

    every = get_study("synthetic").configs(TINY)
    assert len(every) == 1 * 2 * 2 * 2 and select(every) == every
    picked = select(every, settings=["d10_N6"], methods=["sabo"], seeds=[1], functions=["levy"])
    assert [(c.setting, c.method, c.seed, c.problem["name"]) for c in picked] == [("d10_N6", "sabo", 1, "levy")]
    assert select(every, methods=["ingo"]) == [c for c in every if c.method == "ingo"]  # order kept
    assert select(every, seeds=[]) == [] and select(every, functions=["ellipsoid", "levy"]) == every
