"""Committed run tables as baselines (replication/committed.py): `sabo-bench list` counts the runs a committed
table holds, and `sabo-bench run --method NEW --compare-with TABLE` runs only NEW and reports it beside the
table's records of the other methods, or refuses in one line when the table's runs are not the ones this code
would run.

The committed table here is a tiny profile's, written by `sabo-bench report` from SABO's runs alone (what a
committed table is: a report's records); INGO plays the method that is new."""
import json

import pytest
import yaml
from helpers import tiny_params

import baselines
from replication.cli import main
from replication.committed import coverage, default_table
from replication.engine import record_paths
from replication.studies import get_study
from replication.table import read_table_records


@pytest.fixture(scope="module")
def committed(tmp_path_factory):
    """A repository-like directory: params.yaml (methods sabo and ingo, profile tiny) and results/tiny/ with the
    report of SABO's 4 runs (its run table the committed baseline); the runs directory they came from is elsewhere."""
    root = tmp_path_factory.mktemp("repo")
    params = root / "params.yaml"
    params.write_text(yaml.safe_dump(tiny_params()))
    made = tmp_path_factory.mktemp("made")
    common = ["--params", str(params), "--runs-dir", str(made), "--no-track"]
    assert main(["run", "synthetic", *common, "--method", "sabo", "--quiet"]) == 0
    assert main(["report", "synthetic", *common, "--out", str(root / "results" / "tiny")]) == 0
    return root


def cli(capsys, *argv) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out = capsys.readouterr()
    return status, out.out, out.err


def test_list_counts_the_committed_table_beside_the_parameter_file(committed, tmp_path, capsys):
    runs = tmp_path / "runs"  # a fresh clone's: empty
    params = committed / "params.yaml"
    table = committed / "results" / "tiny" / "synthetic_runs.parquet"
    status, out, _ = cli(capsys, "list", "synthetic", "--params", params, "--runs-dir", runs, "--summary")
    assert status == 0
    assert out.splitlines()[:2] == [
        "4 completed, 4 pending",
        f"4 of 8 in {table} (committed run table); 0 recorded under {runs}/synthetic; 4 only in the table; 4 with "
        "no record (`sabo-bench run` computes them)"]
    assert "not in the table: 4 runs of ingo (e.g. d10_N6/ellipsoid/ingo/seed0): no row of that setting, method and " \
           "seed" in out
    # each run's line says where its record is
    status, out, _ = cli(capsys, "list", "synthetic", "--params", params, "--runs-dir", runs, "--method", "sabo",
                         "--seed", "0", "--function", "levy")
    [line] = [line for line in out.splitlines() if "d10_N6/levy/sabo/seed0" in line]
    assert line.split()[1] == "completed" and f"only in {table}; wall " in line
    # recorded here: counted as local, not as only in the table
    assert main(["run", "synthetic", "--params", str(params), "--runs-dir", str(runs), "--method", "ingo",
                 "--no-track", "--quiet"]) == 0
    capsys.readouterr()
    status, out, _ = cli(capsys, "list", "synthetic", "--params", params, "--runs-dir", runs, "--summary")
    assert out.splitlines()[:2] == [
        "8 completed",
        f"4 of 8 in {table} (committed run table); 4 recorded under {runs}/synthetic; 4 only in the table; 0 with "
        "no record (`sabo-bench run` computes them)"]
    status, out, _ = cli(capsys, "list", "synthetic", "--params", params, "--runs-dir", runs, "--summary",
                         "--no-table")
    assert out.splitlines() == ["4 completed, 4 pending"]


def test_the_default_table_is_the_profiles_own(committed, tmp_path):
    assert default_table(committed / "params.yaml", "synthetic", "tiny") == \
        committed / "results" / "tiny" / "synthetic_runs.parquet"
    assert default_table(committed / "params.yaml", "synthetic", "full") is None  # results/ holds no table
    assert default_table(tmp_path / "params.yaml", "synthetic", "tiny") is None


def test_list_says_why_the_table_lacks_runs(committed, tmp_path, capsys, registries, monkeypatch):
    """A bumped revision changes SABO's code version, hence its config hashes: the table's rows no longer count,
    and list names the difference; another profile's table differs in its budget."""
    monkeypatch.setattr(baselines.find("sabo"), "revision", baselines.find("sabo").revision + 1)
    params, runs = committed / "params.yaml", tmp_path / "runs"
    status, out, _ = cli(capsys, "list", "synthetic", "--params", params, "--runs-dir", runs, "--summary")
    assert status == 0 and out.splitlines()[0] == "8 pending"
    revision = baselines.find("sabo").revision
    assert (f"not in the table: 4 runs of sabo (e.g. d10_N6/ellipsoid/sabo/seed0): code version "
            f"0.1.0+sabo.r{revision - 1} there, 0.1.0+sabo.r{revision} here") in out
    monkeypatch.undo()
    status, out, _ = cli(capsys, "list", "synthetic", "--params", params, "--runs-dir", runs, "--summary",
                         "--profile", "full", "--table", committed / "results" / "tiny" / "synthetic_runs.parquet")
    assert "2 runs of sabo (e.g. d10_N6/ellipsoid/sabo/seed0): budget.max_iter = 30 there, 60 here" in out


def test_a_table_that_is_not_one_is_one_line(committed, tmp_path, capsys):
    text = tmp_path / "notes.parquet"
    text.write_text("not parquet")
    status, out, err = cli(capsys, "list", "synthetic", "--params", committed / "params.yaml", "--runs-dir",
                           tmp_path, "--table", text)
    assert status == 2 and err.count("\n") == 1 and err.startswith(f"error: --table '{text}': ")
    assert "not a readable Parquet file" in err


def test_compare_with_runs_only_the_new_method_beside_the_committed_records(committed, tmp_path, capsys):
    params, runs, out_dir = committed / "params.yaml", tmp_path / "runs", tmp_path / "cmp"
    table = committed / "results" / "tiny" / "synthetic_runs.parquet"
    status, out, err = cli(capsys, "run", "synthetic", "--params", params, "--runs-dir", runs, "--no-track",
                           "--quiet", "--method", "ingo", "--compare-with", table, "--compare-out", out_dir)
    assert status == 0, err
    # only INGO ran here
    assert {p.parent.name for p in record_paths(runs / "synthetic")} == {"ingo"}
    assert len(record_paths(runs / "synthetic")) == 4
    assert f"compared ingo (4 runs computed here) with 4 runs of the other methods from {table}" in out
    # the comparison's records: the table's SABO records exactly, and the 4 INGO records made here
    committed_records = {r["config_hash"]: r for r in read_table_records(table)}
    compared = read_table_records(out_dir / "synthetic_runs.parquet")
    assert len(compared) == 8
    for record in compared:
        if record["config"]["method"] == "sabo":
            assert record == committed_records[record["config_hash"]]
        else:
            assert record["config_hash"] not in committed_records
    # the page and the sources file say which rows came from the table
    page = (out_dir / "synthetic.md").read_text()
    assert "| INGO |" in page.split("## Where these records come from")[0]  # the new method is in the report's tables
    section = page.split("## Where these records come from")[1]
    rows = {line.split("|")[1].strip(): line for line in section.splitlines() if line.startswith("| ") and
            "---" not in line and "method" not in line}
    assert f"committed run table `{table}`" in rows["sabo"] and "| 4 |" in rows["sabo"]
    assert f"computed here (`{runs}/synthetic`)" in rows["ingo"]
    sources = json.loads((out_dir / "synthetic_sources.json").read_text())
    assert set(sources["from_table"]["sabo"]) == {r["config_hash"] for r in compared
                                                   if r["config"]["method"] == "sabo"}
    assert set(sources["computed_here"]["ingo"]) == {p.stem for p in record_paths(runs / "synthetic")}
    assert sources["command"] == (f"sabo-bench run synthetic --params {params} --runs-dir {runs} --method ingo "
                                  f"--compare-with {table} --compare-out {out_dir}")


@pytest.mark.parametrize("case", ["code_version", "profile", "no_method", "every_method", "hash", "into_table_dir",
                                  "out_without_compare", "missing_table"])
def test_compare_with_refuses_in_one_line_before_running(committed, tmp_path, capsys, registries, monkeypatch, case):
    params, runs = committed / "params.yaml", tmp_path / "runs"
    table = committed / "results" / "tiny" / "synthetic_runs.parquet"
    argv = ["run", "synthetic", "--params", params, "--runs-dir", runs, "--no-track", "--quiet"]
    compare = ["--compare-with", table, "--compare-out", tmp_path / "cmp"]
    expected = {
        "code_version": (["--method", "ingo", *compare], "code version 0.1.0+sabo.r"),
        "profile": (["--profile", "full", "--method", "ingo", *compare], "budget.max_iter = 30 there, 60 here"),
        "no_method": (compare, "needs --method"),
        "every_method": (["--method", "ingo", "sabo", *compare], "selects every method of profile 'tiny'"),
        "hash": (["--method", "ingo", "--hash", "0123456789abcdef", *compare], None),
        "into_table_dir": (["--method", "ingo", "--compare-with", table, "--compare-out", table.parent],
                           "the directory of the table compared with"),
        "out_without_compare": (["--method", "ingo", "--compare-out", tmp_path / "cmp"], "only with --compare-with"),
        "missing_table": (["--method", "ingo", "--compare-with", tmp_path / "none.parquet"],
                          "not a readable Parquet file"),
    }
    extra, needle = expected[case]
    if case == "code_version":
        monkeypatch.setattr(baselines.find("sabo"), "revision", baselines.find("sabo").revision + 1)
    status, out, err = cli(capsys, *argv, *extra)
    assert status == 2
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
    if needle is not None:
        assert needle in err
    if case in ("code_version", "profile"):  # what is wrong and what is allowed
        assert "it lacks" in err and "same configs and code version" in err and "--method" in err
    assert not record_paths(runs) if runs.exists() else True  # nothing ran
    assert not (tmp_path / "cmp").exists()


def test_coverage_refuses_a_row_that_is_not_its_runs_record(committed, tmp_path):
    """A row under a run's hash holding another config (a table edited by hand) is an error, not a baseline."""
    import pyarrow.parquet as pq

    table = pq.read_table(committed / "results" / "tiny" / "synthetic_runs.parquet")
    records = table.column("record").to_pylist()
    shell = json.loads(records[0])
    shell["config"]["seed"] = 7  # the hash stays: the row now claims a config it does not hold
    records[0] = json.dumps(shell, sort_keys=True, separators=(",", ":"))
    import pyarrow as pa

    edited = table.set_column(table.schema.get_field_index("record"), "record", pa.array(records, pa.string()))
    path = tmp_path / "edited.parquet"
    pq.write_table(edited, path)
    params = yaml.safe_load((committed / "params.yaml").read_text())
    configs = get_study("synthetic").configs(params)
    with pytest.raises(ValueError, match="is unusable: it holds the record of another run"):
        coverage(path, configs)


def test_report_fills_the_runs_without_a_record_from_a_table(committed, tmp_path, capsys):
    """After a method's revision is bumped only its runs are recomputed: `report --fill-from-table` takes the other
    runs' records from the committed table (by exact config hash) and the local records win over the table's."""
    params = committed / "params.yaml"
    table = committed / "results" / "tiny" / "synthetic_runs.parquet"
    runs = tmp_path / "runs"
    assert main(["run", "synthetic", "--params", str(params), "--runs-dir", str(runs), "--no-track", "--quiet",
                 "--method", "ingo"]) == 0
    out = tmp_path / "out"
    status, printed, err = cli(capsys, "report", "synthetic", "--params", params, "--runs-dir", runs, "--out", out,
                               "--no-track", "--fill-from-table", table)
    assert status == 0, err
    assert f"4 records under {runs}/synthetic, 4 taken from {table} (rows with exactly the runs' config hashes)" \
        in printed
    written = {r["config_hash"]: r for r in read_table_records(out / "synthetic_runs.parquet")}
    committed_rows = {r["config_hash"]: r for r in read_table_records(table)}
    local = {json.loads(p.read_text())["config_hash"] for p in record_paths(runs / "synthetic")}
    assert len(written) == 8 and set(written) == set(committed_rows) | local and not set(committed_rows) & local
    assert all(written[h] == committed_rows[h] for h in committed_rows)  # the table's rows unchanged
    # without it, the same report holds the local runs alone (nothing is taken silently)
    status, printed, _ = cli(capsys, "report", "synthetic", "--params", params, "--runs-dir", runs,
                             "--out", tmp_path / "alone", "--no-track")
    assert status == 0 and "4 of 8 runs of profile 'tiny' have records" in printed


@pytest.mark.parametrize("argv, message", [
    (["synthetic", "--from-table", "T"], "error: --fill-from-table adds to the records under --runs-dir; --from-table "
                                         "reads a table alone: use one of them"),
    (["bbob"], "error: --fill-from-table: study 'bbob''s report needs what a run table does not hold (cocopp's pages "
               "(a run table holds no COCO data)) for every run: compute the runs under --runs-dir instead"),
])
def test_fill_from_table_is_refused_where_it_cannot_act(committed, tmp_path, capsys, argv, message):
    table = committed / "results" / "tiny" / "synthetic_runs.parquet"
    status, _, err = cli(capsys, "report", *argv, "--runs-dir", tmp_path, "--out", tmp_path / "o",
                         "--fill-from-table", table)
    assert status == 2 and err.strip().splitlines() == [message]
    assert not (tmp_path / "o").exists()
