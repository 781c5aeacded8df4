"""The sabo-bench command line on a tiny parameter file."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import tiny_params

from replication.cli import main
from replication.engine import record_paths

TINY = tiny_params()


@pytest.fixture
def params(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(TINY))
    return str(path)


def test_help_names_every_command():
    out = subprocess.run([sys.executable, "-m", "replication.cli", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    for command in ("run", "run-one", "list", "prepare", "report", "track", "status"):
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


def test_a_partial_report_says_which_methods_have_not_run(tmp_path, params, capsys):
    common = ["--params", params, "--runs-dir", str(tmp_path / "runs"), "--no-track"]
    assert main(["run", "synthetic", *common, "--method", "sabo", "--function", "levy", "--quiet"]) == 0
    assert main(["report", "synthetic", *common, "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "synthetic.md").read_text()
    assert "Records: `synthetic_runs.parquet` beside this page, one row per run." in md  # not runs/: not here
    time_table = md.split("## Where the time goes")[1].split("##")[0]
    [header] = [line for line in time_table.splitlines() if line.startswith("| setting |")]
    [row] = [line for line in time_table.splitlines() if line.startswith("| d10_N6 |")]
    cells = dict(zip(header.split("|")[2:-1], row.split("|")[2:-1]))
    assert cells[" INGO "] == " not run " and float(cells[" SABO "]) >= 0.0, (header, row)


def test_extra_methods_run_their_own_budget_and_the_report_shows_them_where_they_ran(tmp_path, capsys):
    p = tiny_params(functions=("ellipsoid",))
    s = p["synthetic"]
    s["settings"]["d8_N4"] = {"dim": 8, "popsize": 4}
    for profile in s["profiles"].values():
        profile["iterations"]["d8_N4"] = 20
    s["extra_methods"] = {"ingo_rank": {"optimizer": "ingo", "shaping": "rank"}}
    s["profiles"]["tiny"]["extra_methods"] = {"ingo_rank": {"d10_N6": 5}}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(p))
    runs = tmp_path / "runs"
    common = ["--params", str(path), "--runs-dir", str(runs)]
    # the pipeline's stage of the extra method at a setting where the profile does not run it
    assert main(["run", "synthetic", *common, "--setting", "d8_N4", "--method", "ingo_rank", "--allow-empty",
                 "--no-track", "--quiet"]) == 0
    assert (runs / "synthetic" / "d8_N4" / "ingo_rank").is_dir() and "nothing to do" in capsys.readouterr().out
    assert main(["run", "synthetic", *common, "--no-track", "--quiet"]) == 0
    assert "10 runs finished" in capsys.readouterr().out       # 2 settings x (sabo, ingo) x 2 seeds + 2 extra
    out = tmp_path / "results"
    assert main(["report", "synthetic", *common, "--out", str(out), "--no-track"]) == 0
    md = (out / "synthetic.md").read_text()
    assert "ingo_rank {optimizer: ingo, shaping: rank} at d10_N6 (T = 5)" in md and "**Deviation:**" in md
    tables = {sec.split("\n", 1)[0]: sec for sec in md.split("\n### ")[1:]}
    assert "| ingo_rank (T = 5) |" in tables["d10_N6"]
    assert "ingo_rank" not in tables["d8_N4"].split("## SABO covariance")[0]   # no "not run" column where it never runs
    assert "| E_0 | INGO | SABO |" in tables["d8_N4"]


def test_run_one_refuses_an_ambiguous_selection(tmp_path, params, capsys):
    assert main(["run-one", "synthetic", "--params", params, "--runs-dir", str(tmp_path), "--method", "sabo",
                 "--no-track"]) == 2
    assert "error: the selection matches 4 runs" in capsys.readouterr().err


def test_a_run_selecting_nothing_says_so_and_how_to_accept_it(tmp_path, params, capsys):
    runs = tmp_path / "runs"
    common = ["--params", params, "--runs-dir", str(runs), "--no-track", "--quiet"]
    assert main(["run", "synthetic", *common, "--seed", "7"]) == 2
    assert ("error: no run of profile 'tiny' of study 'synthetic' matches the selection (--allow-empty makes that "
            "exit 0") in capsys.readouterr().err
    assert not runs.exists()  # a refused command leaves nothing behind
    assert main(["run", "synthetic", *common, "--seed", "7", "--allow-empty"]) == 0
    assert (runs / "synthetic").is_dir()  # the pipeline stage's output


def test_run_one_selects_a_run_by_its_config_hash(tmp_path, params, capsys):
    common = ["--params", params, "--runs-dir", str(tmp_path)]
    assert main(["list", "synthetic", *common, "--method", "ingo", "--function", "levy"]) == 0
    listed = [line.split() for line in capsys.readouterr().out.splitlines()]
    pending = [words for words in listed if len(words) == 3 and words[1] == "pending"]
    assert len(pending) == 2, listed  # seeds 0 and 1
    hash_, _, label = pending[0]
    assert main(["run-one", "synthetic", *common, "--hash", hash_, "--no-track", "--quiet"]) == 0
    assert f"{label}: completed" in capsys.readouterr().out
    assert main(["list", "synthetic", *common, "--hash", hash_]) == 0
    assert f"{hash_}  completed" in capsys.readouterr().out
    assert main(["list", "synthetic", *common, "--hash", "0123456789abcdef"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--hash '0123456789abcdef': no run of profile 'tiny'" in err


def test_unknown_profile_is_a_clear_error(tmp_path, params, capsys):
    assert main(["list", "synthetic", "--params", params, "--profile", "huge", "--runs-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--profile 'huge'" in err and "full, tiny" in err and "Traceback" not in err


@pytest.mark.parametrize("workers", [1, 2])
def test_a_parameter_value_the_optimizer_refuses_is_one_line_and_leaves_nothing(tmp_path, capsys, workers):
    """The schema checks parameter names; their values are the optimizer constructor's to check (it alone knows
    its ranges): a refusal stops the study as a usage error before any run starts, so no method's run leaves a
    file (ingo's runs would start after sabo's, the longer ones)."""
    p = tiny_params()
    p["synthetic"]["methods"]["ingo"]["lr"] = -0.1
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(p))
    runs = tmp_path / "runs"
    common = ["--params", str(path), "--runs-dir", str(runs), "--no-track", "--quiet"]
    assert main(["run", "synthetic", *common, "--workers", str(workers)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("error: run synthetic/d10_N6/") and \
        "method 'ingo' (optimizer 'ingo') refuses its parameters: lr must be > 0 (got -0.1)" in err, err
    assert sorted(p for p in runs.rglob("*") if p.is_file()) == []
    assert main(["run-one", "synthetic", *common, "--method", "ingo", "--function", "levy", "--seed", "0"]) == 2
    assert "lr must be > 0 (got -0.1)" in capsys.readouterr().err


def test_a_method_whose_package_is_missing_stops_the_study_in_one_line(tmp_path, capsys, monkeypatch):
    """TuRBO-1 and GIBO without the `bo` extra (the quick profile runs them): one line naming the method and the
    install command, exit status 2, before any run (it used to be a traceback and a lock file left behind)."""
    import baselines

    make = baselines.make

    def without_bo(name, **kw):
        if name == "ingo":
            raise ImportError("TuRBO-1 needs PyTorch, GPyTorch and BoTorch (No module named 'botorch'); install "
                              "them with pip install 'sabo-bench[bo]'")
        return make(name, **kw)

    monkeypatch.setattr(baselines, "make", without_bo)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(tiny_params()))
    runs = tmp_path / "runs"
    assert main(["run", "synthetic", "--params", str(path), "--runs-dir", str(runs), "--no-track", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "method 'ingo' (optimizer 'ingo') cannot run here: TuRBO-1 needs" in err and "sabo-bench[bo]" in err
    assert err.endswith("(or leave the method out: --method names the ones to run)\n")
    assert sorted(p for p in runs.rglob("*") if p.is_file()) == []


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
    with pytest.raises(TypeError, match="missing make_problem, x0, cost, report"):
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


def test_version_prints_the_library_version(capsys):
    import sabo

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out == f"sabo-bench {sabo.__version__}\n"


def test_list_help_names_every_status_list_can_show():
    from replication.engine import RUN_STATUSES

    out = subprocess.run([sys.executable, "-m", "replication.cli", "--help"], capture_output=True, text=True).stdout
    list_help = " ".join(out[out.index("    list "):out.index("    prepare ")].split())
    assert list_help.endswith(f"({', '.join(RUN_STATUSES)})")


def test_list_shows_the_statuses_its_help_names(tmp_path, params, capsys):
    from replication.engine import RUN_STATUSES, checkpoint_path, record_path
    from replication.studies import get_study

    runs = tmp_path / "runs"
    common = ["--params", params, "--runs-dir", str(runs)]
    assert main(["run-one", "synthetic", *common, "--method", "sabo", "--function", "levy", "--seed", "1",
                 "--no-track", "--quiet"]) == 0
    configs = [c for c in get_study("synthetic").configs(TINY) if c.method == "ingo"]
    for path, text in ((record_path(runs, configs[0]), "{garbled"), (checkpoint_path(runs, configs[1]), "")):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    capsys.readouterr()
    assert main(["list", "synthetic", *common, "--summary"]) == 0
    shown = capsys.readouterr().out.splitlines()[0]
    assert shown == "1 completed, 1 corrupt, 1 partial, 5 pending"
    assert {part.split()[1] for part in shown.split(", ")} <= set(RUN_STATUSES)


@pytest.mark.parametrize("command", ["list", "run", "run-one", "track"])
@pytest.mark.parametrize("option,name,known", [("--method", "sabbo", "ingo, sabo"),
                                               ("--setting", "d10_N7", "d10_N6"),
                                               ("--function", "elipsoid", "ellipsoid, levy")])
def test_a_misspelt_name_lists_the_valid_ones(command, option, name, known, tmp_path, params, capsys):
    runs = tmp_path / "runs"
    assert main([command, "synthetic", "--params", params, "--runs-dir", str(runs), option, name]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{option} {name!r}" in err and f"(known: {known})" in err
    assert not runs.exists()  # refused before anything ran


def test_known_names_are_listed_in_natural_order(tmp_path, capsys):
    """BBOB's functions as f1, f2, ..., f10, not f1, f10, f11, ..., f2."""
    params = Path(__file__).resolve().parents[1] / "params.yaml"
    assert main(["list", "bbob", "--params", str(params), "--runs-dir", str(tmp_path), "--function", "f99"]) == 2
    assert "(known: f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, " in capsys.readouterr().err


def report(params, runs, out, *extra):
    return main(["report", "synthetic", "--params", params, "--runs-dir", str(runs), "--out", str(out),
                 "--no-track", *extra])


def test_a_partial_or_other_profile_report_does_not_replace_a_full_one(tmp_path, params, capsys):
    import json

    runs, out = tmp_path / "runs", tmp_path / "results"
    assert main(["run", "synthetic", "--params", params, "--runs-dir", str(runs), "--no-track", "--quiet"]) == 0
    assert report(params, runs, out) == 0
    claims = out / "synthetic_claims.json"
    meta = json.loads(claims.read_text())
    assert (meta["profile"], meta["records"], meta["runs"]) == ("tiny", 8, 8)
    page = (out / "synthetic.md").read_bytes()

    next(runs.rglob("*.json")).unlink()  # 7 of 8 records: a partial report
    capsys.readouterr()
    assert report(params, runs, out) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "7 of 8 runs" in err and f"--out {out / 'tiny'}" in err and "--force" in err
    assert main(["run", "synthetic", "--params", params, "--profile", "full", "--runs-dir", str(runs), "--no-track",
                 "--quiet"]) == 0
    capsys.readouterr()
    assert report(params, runs, out, "--profile", "full") == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "another profile" in err and "profile 'tiny', 8 of 8 runs" in err
    assert (out / "synthetic.md").read_bytes() == page and json.loads(claims.read_text()) == meta  # untouched

    assert report(params, runs, out / "full", "--profile", "full") == 0  # written elsewhere
    killed = [out / ".synthetic.md.x1.tmp", out / "figures" / ".synthetic_d10_N6.png.x2.tmp"]  # mid-write
    for path in killed:
        path.write_bytes(b"half a file")
    assert report(params, runs, out, "--force") == 0
    assert json.loads(claims.read_text())["records"] == 7
    assert not any(path.exists() for path in killed)  # a report removes what one killed mid-write left


def test_a_report_from_no_record_is_an_error_unless_the_profile_defines_no_run(tmp_path, params, capsys):
    out = tmp_path / "results"
    assert report(params, tmp_path / "runs", out) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no records of the 8 runs of profile 'tiny'" in err
    assert not out.exists()


def test_which_existing_reports_a_new_one_may_replace(tmp_path):
    from replication.claims import replacement_refusal
    from replication.storage import write_json

    def refusal(old, **new):
        write_json(tmp_path / "s_claims.json", {"claims": [], **old})
        return replacement_refusal(tmp_path, "s", **{"profile": "full", "records": 10, "runs": 10, **new})

    assert replacement_refusal(tmp_path / "none", "s", profile="full", records=0, runs=10) is None
    assert refusal({"profile": "full", "records": 10, "runs": 10}) is None              # a complete one
    assert refusal({"profile": "full", "records": 4, "runs": 10}, records=6) is None    # more records
    assert refusal({"profile": "full", "records": 6, "runs": 10}, records=4) is not None
    assert refusal({"profile": "full"}, records=9) is not None                          # no counts: complete
    assert refusal({"profile": "quick", "records": 2, "runs": 2}) is not None
    assert refusal({"profile": "offline", "records": 0, "runs": 0}) is None             # nothing to lose
    (tmp_path / "s_claims.json").write_text("{garbled")  # what the report holds is unknown: refused
    assert "s_claims.json cannot be read (not JSON)" in replacement_refusal(tmp_path, "s", profile="full",
                                                                                  records=1, runs=10)
    write_json(tmp_path / "s_claims.json", {"profile": "full", "records": "all"})
    assert "does not say what its report was made from" in refusal({"profile": "full", "records": "all"})
    (tmp_path / "s_claims.json").unlink()
    write_json(tmp_path / "s_metrics.json", {"profile": "quick", "records": 2, "runs": 2})  # the other description
    assert "s_metrics.json is a report of another profile" in replacement_refusal(tmp_path, "s", profile="full",
                                                                                  records=10, runs=10)
    (tmp_path / "s_metrics.json").unlink()
    (tmp_path / "s.md").write_text("# a page whose descriptions are gone\n")
    assert "s.md is a report whose claims and metrics files are gone" in replacement_refusal(
        tmp_path, "s", profile="full", records=10, runs=10)


@pytest.mark.parametrize("damage", ["delete", "garble"])
def test_a_damaged_claims_file_does_not_let_another_profile_replace_a_report(damage, tmp_path, params, capsys):
    """The guard read the claims file alone: deleted or filled with garbage, a report of another profile
    silently replaced the committed one (page, figures, run table, metrics)."""
    runs, out = tmp_path / "runs", tmp_path / "results"
    assert main(["run", "synthetic", "--params", params, "--runs-dir", str(runs), "--no-track", "--quiet"]) == 0
    assert main(["run", "synthetic", "--params", params, "--profile", "full", "--runs-dir", str(runs), "--no-track",
                 "--quiet"]) == 0
    assert report(params, runs, out) == 0
    claims = out / "synthetic_claims.json"
    if damage == "delete":
        claims.unlink()
    else:
        claims.write_bytes(b"\x00garbage\xff" * 100)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert report(params, runs, out, "--profile", "full") == 1
    [line] = capsys.readouterr().err.splitlines()
    expected = "synthetic_metrics.json is a report of another profile" if damage == "delete" else \
        "synthetic_claims.json cannot be read (not JSON)"
    assert line.startswith("error: ") and expected in line and "or use --force" in line, line
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before  # nothing replaced
    assert report(params, runs, out, "--profile", "full", "--force") == 0


def test_paths_that_cannot_be_used_are_one_line_before_anything_is_written(tmp_path, params, capsys):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    for argv in (["list", "synthetic", "--params", params, "--runs-dir", str(a_file)],
                 ["run", "synthetic", "--params", params, "--runs-dir", str(a_file / "runs"), "--no-track"],
                 ["report", "synthetic", "--params", params, "--out", str(a_file), "--no-track"]):
        with pytest.raises(SystemExit) as stop:
            main(argv)
        err = capsys.readouterr().err
        assert stop.value.code == 2 and err.count("\n") == 1 and f"{str(a_file)!r} is a file" in err, err
    runs = tmp_path / "runs"
    assert main(["run", "synthetic", "--params", params, "--runs-dir", str(runs), "--no-track", "--quiet"]) == 0
    capsys.readouterr()
    bad_json = tmp_path / "expected.json"
    bad_json.write_text("{not json")
    wrong_shape = tmp_path / "shape.json"
    wrong_shape.write_text('{"reproduced": "all"}')
    other_profile = tmp_path / "full.json"
    other_profile.write_text('{"profile": "full", "reproduced": []}')  # checked without comment before
    for path, why in ((tmp_path / "missing.json", "cannot be read (No such file or directory)"),
                      (bad_json, "not a JSON file"), (wrong_shape, 'must hold {"reproduced": [claim ids]'),
                      (other_profile, "recorded for profile 'full', but this report is of profile 'tiny'")):
        out = tmp_path / "results"
        assert main(["report", "synthetic", "--params", params, "--runs-dir", str(runs), "--out", str(out),
                     "--no-track", "--check-claims", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"error: --check-claims {str(path)!r}: {why}" in err, err
        assert not out.exists()  # checked before the report is written


def test_a_reader_that_leaves_early_is_no_error(tmp_path, params):
    """`sabo-bench list | head -1`: the pipe closes under the listing; no BrokenPipeError traceback."""
    cmd = (f"{sys.executable} -m replication.cli list synthetic --params {params} --runs-dir {tmp_path} "
           "| head -c 1 > /dev/null; exit ${PIPESTATUS[0]}")
    done = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr


def test_check_claims_reads_its_file_before_record_expected_rewrites_it(tmp_path, params, capsys):
    """The same file for both: the check is against what it held before (else it would pass by construction)."""
    runs = tmp_path / "runs"
    assert main(["run", "synthetic", "--params", params, "--runs-dir", str(runs), "--no-track", "--quiet"]) == 0
    expected = tmp_path / "expected.json"
    expected.write_text('{"reproduced": ["ghost_claim"]}')
    assert main(["report", "synthetic", "--params", params, "--runs-dir", str(runs), "--out", str(tmp_path / "out"),
                 "--no-track", "--record-expected", str(expected), "--check-claims", str(expected)]) == 1
    assert "CLAIM REGRESSION: ghost_claim: no longer evaluated" in capsys.readouterr().err
    assert "ghost_claim" not in expected.read_text()  # recorded anew


@pytest.mark.parametrize("command, said", [("report", "the report is incomplete"),
                                           ("run", "interrupted ones checkpointed (a run that writes files")])
def test_a_stopped_command_says_what_it_left(command, said, monkeypatch, capsys):
    """A stopped report used to say that its runs were checkpointed."""
    from replication import cli

    def stopped(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, f"cmd_{command}", stopped)
    assert cli.main([command, "synthetic"]) == 130
    err = capsys.readouterr().err
    assert err.startswith("stopped by SIGINT: ") and said in err and err.count("\n") == 1


def test_a_selection_option_given_twice_selects_both(params, capsys):
    assert main(["list", "synthetic", "--params", params, "--method", "sabo", "--method", "ingo", "--seed", "0",
                 "--seed", "1", "--summary"]) == 0
    assert "8 pending" in capsys.readouterr().out  # not only the last --method's 4
    assert main(["list", "synthetic", "--params", params, "--hash", "x", "--hash", "y"]) == 2
    assert "--hash 'x': no run" in capsys.readouterr().err  # the first hash counts too (argparse kept only 'y')


@pytest.mark.parametrize("runs_dir, why", [("/proc/x", "No such file or directory"),
                                           ("/sys/kernel/x", "Operation not permitted")])
def test_a_runs_directory_that_cannot_be_made_is_one_line(params, capsys, runs_dir, why):
    if not Path(runs_dir).parent.is_dir():
        pytest.skip(f"{Path(runs_dir).parent} is not a directory here")
    for command in ("run", "run-one"):
        assert main([command, "synthetic", "--params", params, "--runs-dir", runs_dir, "--method", "sabo",
                     "--function", "levy", "--seed", "0", "--no-track", "--quiet"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: --runs-dir '{runs_dir}': cannot create '{runs_dir}/synthetic' (") and \
            err.count("\n") == 1, err


def test_ray_not_installed_is_one_line_before_anything_runs(tmp_path, params, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    assert main(["run", "synthetic", "--params", params, "--runs-dir", str(tmp_path / "runs"), "--executor", "ray",
                 "--no-track", "--quiet"]) == 2
    assert capsys.readouterr().err == ('error: --executor ray needs Ray: pip install -e ".[distributed]" (or use '
                                       '--executor local)\n')
    assert not list((tmp_path / "runs").rglob("*.json"))


def test_a_failed_run_is_one_line_and_exit_status_1(tmp_path, params, capsys, monkeypatch):
    from replication import cli
    from replication.errors import RunFailed

    def fail(*args, **kwargs):
        raise RunFailed("run d10_N6/levy/sabo/seed0 (method 'sabo') failed: RuntimeError: boom (at x.py:1 in f); "
                        "the traceback is in t.error.txt")

    monkeypatch.setattr(cli, "run_configs", fail)
    assert main(["run", "synthetic", "--params", params, "--runs-dir", str(tmp_path), "--no-track", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: run d10_N6/levy/sabo/seed0 (method 'sabo') failed: RuntimeError: boom") and \
        err.endswith("the study stopped (other runs recorded or checkpointed): run the same command again to retry "
                     "(`run --keep-going` runs the others first)\n")
    assert err.count("\n") == 1


def test_a_methods_own_popsize_in_the_synthetic_study_is_refused(tmp_path, capsys):
    """The settings set N there (d10_N6: N = 6); a method's popsize would run another N under that label."""
    bad = tiny_params()
    bad["synthetic"]["methods"]["ingo"] = {**bad["synthetic"]["methods"]["ingo"], "popsize": 10}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(bad))
    assert main(["list", "synthetic", "--params", str(path)]) == 2
    assert capsys.readouterr().err == ("error: params.yaml: synthetic.methods.ingo.popsize = 10: in this study the "
                                       "settings set the population size (N = 6 at d10_N6); remove it, or add a "
                                       "setting with the N you want\n")


def test_run_one_counts_an_evaluation_budget_in_evaluations(tmp_path, capsys):
    """A BBOB run (budget in evaluations): the bar shows evaluations of max_evals, ending at the run's nfev."""
    assert main(["run-one", "bbob", "--profile", "ci", "--runs-dir", str(tmp_path), "--method", "mmes",
                 "--function", "f1", "--seed", "1", "--setting", "bbob", "--no-track"]) == 0
    err = capsys.readouterr().err.replace("\r", "\n").splitlines()
    last = [line for line in err if "evals" in line][-1]
    [record] = [json.loads(p.read_text()) for p in record_paths(tmp_path)]
    nfev, max_evals = record["result"]["final"]["nfev"], record["config"]["budget"]["max_evals"]
    assert f"{nfev}/{max_evals}" in last


@pytest.fixture
def small_disk(tmp_path, request):
    """A directory on a file system with room for about one figure: a 160 KiB tmpfs where one can be mounted
    (root), else (``patched``) ``os.fsync`` failing with ENOSPC from the third file written there on, as a
    full disk does."""
    import errno
    import shutil

    where = tmp_path / "disk"
    where.mkdir()
    if request.param == "tmpfs":
        if shutil.which("mount") is None or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs",
                                                            str(where)], capture_output=True).returncode != 0:
            pytest.skip("cannot mount a tmpfs here (not root); the patched variant runs instead")
        yield where
        subprocess.run(["umount", str(where)], check=True)
        return
    real, calls = os.fsync, []

    def fsync(fd):
        name = os.readlink(f"/proc/self/fd/{fd}")
        if name.startswith(f"{where}/") and not os.path.isdir(name):  # a file there, not a directory
            calls.append(fd)
            if len(calls) > 2:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "fsync", fsync)
        yield where


@pytest.mark.parametrize("small_disk", ["tmpfs", "patched"], indirect=True)
def test_a_full_disk_is_one_line_and_leaves_no_half_written_file(tmp_path, params, small_disk, capsys):
    """A full disk was a 15-59 line OSError traceback and left a truncated PNG (matplotlib wrote in place)."""
    runs = tmp_path / "runs"
    assert main(["run", "synthetic", "--params", params, "--runs-dir", str(runs), "--no-track", "--quiet"]) == 0
    capsys.readouterr()
    assert report(params, runs, small_disk) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: cannot write {small_disk}") and "(No space left on device)" in line, line
    assert "the report is incomplete" in line
    files = [p for p in small_disk.rglob("*") if p.is_file()]
    assert not [p for p in files if p.name.endswith(".tmp")]
    for png in (p for p in files if p.suffix == ".png"):  # whole: the signature, and the IEND chunk last
        data = png.read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and data.endswith(b"IEND\xaeB`\x82"), png
    for svg in (p for p in files if p.suffix == ".svg"):
        assert svg.read_text().rstrip().endswith("</svg>"), svg


@pytest.fixture
def read_only_copy(tmp_path):
    """``copy(src)``: a copy of the directory ``src`` that cannot be written: on a tmpfs remounted read-only for
    root (whom permissions do not stop), else without write permission."""
    import shutil

    made = []

    def copy(src: Path) -> Path:
        target = tmp_path / f"read-only-{len(made)}"
        target.mkdir()
        made.append(target)
        if os.geteuid() == 0:
            if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(target)],
                              capture_output=True).returncode != 0:
                pytest.skip("root without a tmpfs to remount read-only: nothing here cannot be written")
            shutil.copytree(src, target, dirs_exist_ok=True)
            subprocess.run(["mount", "-o", "remount,ro", str(target)], check=True)
        else:
            shutil.copytree(src, target, dirs_exist_ok=True)
            for d in [target, *(p for p in target.rglob("*") if p.is_dir())]:
                d.chmod(0o555)
        return target

    yield copy
    for target in made:
        if os.geteuid() == 0:
            subprocess.run(["umount", str(target)], capture_output=True)
        else:
            for d in [target, *(p for p in target.rglob("*") if p.is_dir())]:
                d.chmod(0o755)


def test_a_read_only_out_or_runs_dir_is_one_line(tmp_path, params, read_only_copy, capsys):
    """A place that cannot be written was an OSError traceback: `report --out` there, and `run` on a runs
    directory there (the lock file of a run it would compute)."""
    import shutil

    runs = tmp_path / "runs"
    assert main(["run", "synthetic", "--params", params, "--runs-dir", str(runs), "--no-track", "--quiet",
                 "--method", "ingo"]) == 0
    shutil.rmtree(runs / ".kept")  # records of an older sabo-bench, with no second name yet
    locked = read_only_copy(runs)
    capsys.readouterr()
    assert main(["run", "synthetic", "--params", params, "--runs-dir", str(locked), "--no-track", "--quiet",
                 "--method", "ingo"]) == 0  # finished: nothing to write but the second names, a warning
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"warning: 4 record(s) have no second name under {locked / '.kept'}"), line
    assert report(params, locked, locked / "results") == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: cannot write {locked / 'results'} (") and "the report is incomplete" in line
    assert main(["run", "synthetic", "--params", params, "--runs-dir", str(locked), "--no-track", "--quiet"]) == 1
    warning, line = capsys.readouterr().err.splitlines()
    assert warning.startswith("warning: 4 record(s) have no second name")
    assert line.startswith(f"error: cannot write {locked / 'synthetic' / 'd10_N6' / 'sabo'}"), line
    assert "run the same command again" in line
