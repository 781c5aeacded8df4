"""Run tables, DVC metrics and curves files: what `sabo-bench report` writes beside a report.

A report re-rendered from its run table (``--from-table``, no ``runs/``) must be byte for byte
the report made from the records: page, claims, figures, metrics, curves and the table itself.
"""
import copy
import csv
import json
import math
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import tiny_params

from replication.cli import main
from replication.config import canonical_json
from replication.engine import record_path
from replication.params import read_params
from replication.storage import write_json
from replication.studies import get_study
from replication.table import read_table_records, records_from_table, table_path, write_table

TINY = tiny_params()
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory):
    """The tiny synthetic study run once through the CLI: (params path, runs dir)."""
    root = tmp_path_factory.mktemp("tiny")
    params = root / "params.yaml"
    params.write_text(yaml.safe_dump(TINY))
    runs = root / "runs"
    assert main(["run", "synthetic", "--params", str(params), "--runs-dir", str(runs), "--no-track", "--quiet"]) == 0
    return str(params), runs


def report(study, params, out, *extra):
    return main(["report", study, "--params", params, "--out", str(out), "--no-track", *extra])


def files_of(directory):
    return {p.relative_to(directory): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def records_of(params_path, runs, study="synthetic"):
    from replication.engine import load_record

    params = yaml.safe_load(open(params_path))
    return [r for r in (load_record(runs, c) for c in get_study(study).configs(params)) if r is not None]


def as_json(records) -> str:
    """Records as text that compares NaN equal to NaN (dict == does not)."""
    return json.dumps(records, sort_keys=True, allow_nan=True)


def test_the_synthetic_report_writes_its_table_metrics_and_curves(tiny_study, tmp_path):
    params, runs = tiny_study
    out = tmp_path / "results"
    assert report("synthetic", params, out, "--runs-dir", str(runs)) == 0
    records = records_of(params, runs)
    assert len(records) == 8

    metrics = json.loads((out / "synthetic_metrics.json").read_text())
    claims = json.loads((out / "synthetic_claims.json").read_text())["claims"]
    assert set(metrics) == {"profile", "records", "runs", "reproduced", "sabo", "ingo"}  # flat, short keys
    assert (metrics["profile"], metrics["records"], metrics["runs"]) == ("tiny", 8, 8)
    assert metrics["reproduced"] == sum(c["verdict"] == "reproduced" for c in claims)
    # per method: the median over the (setting, function) cells of log10 of the cell's median over the two
    # seeds of E_T, from the records themselves, to 2 decimals
    for method in ("sabo", "ingo"):
        cells = []
        for function in ("ellipsoid", "levy"):
            finals = [r["result"]["curve"]["error"][-1] for r in records
                      if (r["config"]["problem"]["name"], r["config"]["method"]) == (function, method)]
            assert len(finals) == 2
            cells.append(math.log10(np.median(finals)))
        assert metrics[method] == round(float(np.median(cells)), 2)

    with open(out / "synthetic_curves.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == ["panel", "method", "seed", "setting", "function", "nit", "nfev", "error"]
    assert len(rows) == sum(len(r["result"]["curve"]["nit"]) for r in records)  # one row per run and curve point
    first = records[0]
    c = first["config"]
    mine = [row for row in rows if (row["function"], row["method"], row["seed"]) == (c["problem"]["name"],
                                                                                    c["method"], str(c["seed"]))]
    assert [int(row["nit"]) for row in mine] == first["result"]["curve"]["nit"]
    assert [float(row["error"]) for row in mine] == pytest.approx(first["result"]["curve"]["error"], rel=1e-5)
    assert {row["panel"] for row in rows} == {"d10_N6 ellipsoid", "d10_N6 levy"}

    table = read_table_records(table_path(out, "synthetic"))
    assert as_json(table) == as_json(records)  # the records, in config order


def test_a_report_from_its_run_table_is_byte_identical(tiny_study, tmp_path, capsys):
    params, runs = tiny_study
    first, second, third = tmp_path / "from_runs", tmp_path / "from_table", tmp_path / "again"
    assert report("synthetic", params, first, "--runs-dir", str(runs)) == 0
    capsys.readouterr()
    table = first / "synthetic_runs.parquet"
    assert report("synthetic", params, second, "--runs-dir", str(tmp_path / "no-runs"), "--from-table", str(table)) == 0
    assert f"8 of 8 runs of profile 'tiny' have records ({table})" in capsys.readouterr().out
    made = files_of(first)
    assert {str(p) for p in made} >= {"synthetic.md", "synthetic_claims.json", "synthetic_metrics.json",
                                      "synthetic_curves.csv", "synthetic_runs.parquet",
                                      "figures/synthetic_d10_N6.png", "figures/synthetic_d10_N6_evals.png"}
    assert files_of(second) == made
    assert report("synthetic", params, third, "--from-table", str(second / "synthetic_runs.parquet")) == 0
    assert files_of(third) == made  # a table re-written from a table is the same table
    # the page carries no time of its own (it would differ between two renderings a minute apart)
    assert datetime.now(timezone.utc).strftime("%Y-%m-%d %H:") not in made[Path("synthetic.md")].decode()


def test_the_table_rebuilds_every_kind_of_record_exactly(tiny_study, tmp_path):
    """NaN (as in an evaluation-only run's f_best) and inf values, a diverged run, nested and list-valued
    stats, a final evaluation, a parameter that is a string in one run and a number in another."""
    params, runs = tiny_study
    records = records_of(params, runs)
    odd = copy.deepcopy(records[:3])
    odd[0]["result"].update(status="diverged", message="non-finite values: ünïcode")
    odd[0]["result"]["curve"]["error"][-1] = math.inf
    odd[0]["result"]["final"]["error"] = math.inf
    odd[1]["result"]["curve"]["f_best"][0] = math.nan
    odd[1]["result"]["stats"] = {"count": 3, "nested": {"a": 1.5, "b": None, "counts": [1, 2, 3]}, "empty": {}}
    odd[1]["result"]["final_evaluation"] = {"test_metric_final": 0.75, "best_dev_point": -1}
    odd[2]["config"]["params"]["lr"] = "auto"  # the other rows hold numbers under params.lr
    odd[2]["result"]["stats"] = {}
    path = write_table(tmp_path / "t.parquet", [*odd, *records[3:]])
    back = read_table_records(path)
    assert as_json(back) == as_json([*odd, *records[3:]])
    assert [list(r["result"]["curve"]) for r in back] == [list(r["result"]["curve"]) for r in records]  # key order
    assert isinstance(back[0]["result"]["curve"]["nit"][1], int)
    assert back[1]["result"]["stats"]["nested"]["counts"] == [1, 2, 3]

    import pyarrow.parquet as pq

    table = pq.read_table(path)
    assert table.num_rows == 8 and table.column_names[:5] == ["study", "setting", "problem.name", "method", "seed"]
    assert {"params.lr", "final.error", "stats.flat_populations", "provenance.finished_utc", "curve.error",
            "record"} <= set(table.column_names)
    assert table.column("params.lr").to_pylist()[1:3] == ["0.1", '"auto"']  # no common type: JSON text
    assert table.column("curve.error").to_pylist()[3] == records[3]["result"]["curve"]["error"]


def test_a_table_gives_the_runs_of_the_profile_in_config_order_and_refuses_an_altered_row(tiny_study, tmp_path):
    params, runs = tiny_study
    records = records_of(params, runs)
    configs = get_study("synthetic").configs(yaml.safe_load(open(params)))  # the file's order of methods
    path = write_table(tmp_path / "t.parquet", records[::-1])
    assert as_json(records_from_table(path, configs)) == as_json(records)
    assert records_from_table(path, get_study("synthetic").configs({**TINY, "synthetic": {
        **TINY["synthetic"], "profile": "full"}})) == []  # another profile's runs: none here

    altered = copy.deepcopy(records)
    altered[2]["config"]["seed"] = 7  # claims the hash of a run whose config it no longer holds
    with pytest.raises(ValueError, match="holds the record of another run"):
        records_from_table(write_table(tmp_path / "a.parquet", altered), configs)
    with pytest.raises(ValueError, match="occurs twice"):
        records_from_table(write_table(tmp_path / "d.parquet", [*records, records[0]]), configs)

    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"x": [1]}), tmp_path / "other.parquet")
    with pytest.raises(ValueError, match="not a sabo-bench run table"):
        read_table_records(tmp_path / "other.parquet")


def test_report_names_the_run_table_when_runs_are_missing(tiny_study, tmp_path, capsys):
    params, runs = tiny_study
    out = tmp_path / "results"
    assert report("synthetic", params, out, "--runs-dir", str(runs)) == 0
    capsys.readouterr()
    assert report("synthetic", params, out, "--runs-dir", str(tmp_path / "fresh-clone"), "--force") == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--from-table {out / 'synthetic_runs.parquet'}" in err
    assert report("synthetic", params, out, "--from-table", str(tmp_path / "missing.parquet")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: --from-table:") and "Traceback" not in err
    # another study's table: said so, not "no records of the ... runs"
    assert report("image", str(ROOT / "params.yaml"), tmp_path / "image", "--from-table",
                  str(out / "synthetic_runs.parquet")) == 2
    assert capsys.readouterr().err.endswith("synthetic_runs.parquet is a run table of study 'synthetic', not of "
                                            "'image'\n")


# ------------------------------------------------------------------ hostile run tables
def rewritten(path, target, change):
    """The run table at ``path`` with ``change(table) -> table`` applied, its run-table metadata kept."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    pq.write_table(change(table).replace_schema_metadata(table.schema.metadata), target, compression="zstd")
    return target


def replaced(name, values, kind=None):
    def change(table):
        import pyarrow as pa

        column = values(table.column(name).to_pylist())
        return table.set_column(table.column_names.index(name), name, pa.array(column, kind))
    return change


def record_cells(change_record):
    return replaced("record", lambda cells: [json.dumps(change_record(json.loads(c))) for c in cells])


MALFORMED = {  # name -> (change, what the one line says)
    "no record column": (lambda t: t.drop_columns(["record"]), "not a run table: it has no column 'record'"),
    "ints for records": (replaced("record", lambda cells: list(range(len(cells)))),
                         "not a run table: column 'record' must be a column of strings (it holds int64)"),
    "lists for records": (replaced("record", lambda cells: [[1, 2]] * len(cells)),
                          "column 'record' must be a column of strings (it holds list<element: int64>)"),
    "nulls for records": (replaced("record", lambda cells: [None] * len(cells), "string"),
                          "its record is empty (null)"),
    "a record without result": (record_cells(lambda r: {k: v for k, v in r.items() if k != "result"}),
                                "its record must name its curve columns (a list under result.curve)"),
    "a curve that is no list": (replaced("curve.error", lambda cells: [1.0] * len(cells)),
                                "column 'curve.error' must be a column of lists of int64 or float64 numbers (it "
                                "holds double)"),
    "an all-NaN curve": (replaced("curve.error", lambda cells: [[math.nan] * len(c) for c in cells]),
                         "its record is unusable: result: curve: column error holds no number (every value is NaN)"),
    "NaN iterations": (replaced("curve.nit", lambda cells: [[math.nan] * len(c) for c in cells]),
                       "its record is unusable: result: curve: nit must be non-decreasing integers >= 0"),
    "strings for curve numbers": (replaced("curve.error", lambda cells: [[str(x) for x in c] for c in cells]),
                                  "column 'curve.error' must be a column of lists of int64 or float64 numbers (it "
                                  "holds list<element: string>)"),
    "a string for a number in a record": (record_cells(lambda r: {**r, "provenance": {**r["provenance"],
                                                                                      "wall_time_s": "3.5"}}),
                                          "its record is unusable: provenance.wall_time_s: must be a number (got "
                                          "str)"),
}


@pytest.mark.parametrize("change,said", MALFORMED.values(), ids=MALFORMED)
def test_a_malformed_run_table_is_refused_in_one_line(tiny_study, tmp_path, capsys, change, said):
    """Each ended `report --from-table` in a KeyError or TypeError traceback (strings for curve numbers were read
    as numbers; an all-NaN curve failed in matplotlib)."""
    params, runs = tiny_study
    path = rewritten(write_table(tmp_path / "t.parquet", records_of(params, runs)), tmp_path / "bad.parquet", change)
    assert report("synthetic", params, tmp_path / "out", "--from-table", str(path)) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: --from-table: {path}") and said in line
    assert not (tmp_path / "out").exists()


PEAK = """
import resource, sys, yaml
import pyarrow.parquet  # imported before the first measurement
from replication.studies import get_study
from replication.table import records_from_table
configs = get_study("synthetic").configs(yaml.safe_load(open(sys.argv[1])))
for table in sys.argv[2:]:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        said = f"{len(records_from_table(table, configs))} records"
    except ValueError as exc:
        said = str(exc)
    print(said, "|", (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""


def added_peaks_mib(params, *tables) -> list[tuple[str, int]]:
    """(what records_from_table returned or said, the MiB it added to the peak memory so far) for each table, one
    after the other in a process of its own (with a 2 GB address-space limit: a regression fails there, not on the
    machine). The peak is a high-water mark: each number is at most what reading that table took on its own."""
    def limited():
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))

    done = subprocess.run([sys.executable, "-c", PEAK, params, *map(str, tables)], capture_output=True, text=True,
                          timeout=300, preexec_fn=limited)
    assert done.returncode == 0, done.stderr
    return [(said, int(mib)) for said, mib in (line.rsplit(" | ", 1) for line in done.stdout.splitlines())]


def test_reading_a_hostile_run_table_takes_bounded_memory(tiny_study, tmp_path):
    """200,000 rows of other runs (a 2 MB file) took 3.4 GB to refuse, a 400 MB column of zeros (a 40 kB file)
    0.75 GB: every row's record was parsed, every column decompressed. Now only config_hash is read for the rows not
    asked for, and only the columns needed: each takes less than 150 MB (about 60-100 MB here)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    params, runs = tiny_study
    good = write_table(tmp_path / "good.parquet", records_of(params, runs))

    def foreign(table):  # one row with a one-point curve, under 200,000 hashes of no run here
        one = table.slice(0, 1)
        for name in [c for c in one.column_names if c.startswith("curve.")]:
            one = one.set_column(one.column_names.index(name), name, pa.array([one.column(name)[0].as_py()[:1]]))
        rows = one.take([0] * 200_000)
        hashes = pa.array([f"{i:016x}" for i in range(200_000)])
        return rows.set_column(rows.column_names.index("config_hash"), "config_hash", hashes)

    table = pq.read_table(good)
    zeros = "0" * 50 * 2**20
    junk = tmp_path / "junk.parquet"
    with pq.ParquetWriter(junk, table.schema.append(pa.field("junk", pa.large_string())), compression="zstd") as out:
        for i in range(table.num_rows):  # a row group per row: the test holds one 50 MB cell at a time
            out.write_table(table.slice(i, 1).append_column("junk", pa.array([zeros], pa.large_string())))
    assert junk.stat().st_size < 2**20
    (said_junk, junk_mib), (said_foreign, foreign_mib) = added_peaks_mib(
        params, junk, rewritten(good, tmp_path / "foreign.parquet", foreign))
    assert said_junk == "8 records" and said_foreign == "0 records"
    assert junk_mib < 150 and foreign_mib < 150


# ------------------------------------------------------------------ the image and prompt studies
def image_params(tmp_path):
    """params.yaml with the image study's ci profile (2 noise rates, d100, 62 configurations, 1 seed)."""
    params = read_params(ROOT / "params.yaml")
    params["image"]["profile"] = "ci"
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return str(path), params


def fake_image_records(params, runs):
    """A record for every run of the image ci profile, without computing one: within each cell
    (d, noise rate, method) the k-th configuration gets validation accuracy 0.5 + 0.01 k and test
    accuracy 0.3 + 0.01 k, so the selected one is the last; MMES diverges at noise 60%."""
    configs = get_study("image").configs(params)
    index: dict = {}
    expected = {}
    for c in configs:
        cell = (c.setting, c.problem["noise_rate"], c.method)
        k = index.setdefault(cell, {}).setdefault(canonical_json(c.params), len(index[cell]))
        diverged = c.method == "mmes" and c.problem["noise_rate"] == 0.6
        val, test = 0.5 + 0.01 * k, 0.3 + 0.01 * k
        curve = {"nit": [0, 10, 30], "nfev": [0, 1000, 3000], "f_best": [2.3, 1.9, 1.7],
                 "test_accuracy": [0.1, test - 0.05, test], "val_accuracy": [0.1, val - 0.05, val]}
        result = {"status": "diverged" if diverged else "completed", "message": "fake", "seeds": {},
                  "evals_per_iteration": 100, "final": {key: v[-1] for key, v in curve.items()}, "curve": curve,
                  "stats": {}}
        provenance = {"versions": {}, "git_revision": "abc", "host": "fake", "started_utc": "2026-01-01T00:00:00+00:00",
                      "finished_utc": f"2026-01-01T00:00:{k:02d}+00:00", "wall_time_s": 1.0, "resumed": 0,
                      "cuda_visible_devices": None}
        record = {"schema": 1, "config": c.to_dict(), "config_hash": c.hash, "group_hash": c.group_hash,
                  "result": result, "provenance": provenance}
        write_json(record_path(runs, c), record)
        expected[cell] = None if diverged else 100 * test  # the last k of the cell wins
    return configs, expected


def test_the_image_report_from_its_table_is_byte_identical_and_its_metrics_are_the_selected_cells(tmp_path):
    path, params = image_params(tmp_path)
    runs = tmp_path / "runs"
    configs, expected = fake_image_records(params, runs)
    first, second = tmp_path / "from_runs", tmp_path / "from_table"
    assert report("image", path, first, "--runs-dir", str(runs)) == 0
    assert report("image", path, second, "--runs-dir", str(tmp_path / "none"),
                  "--from-table", str(first / "noisy_labels_runs.parquet")) == 0
    made = files_of(first)
    assert files_of(second) == made and len(made) == 7  # md, claims, figure (PNG, SVG), table, metrics, curves

    metrics = json.loads((first / "noisy_labels_metrics.json").read_text())
    assert (metrics["profile"], metrics["records"], metrics["runs"]) == ("ci", len(configs), len(configs))
    assert set(metrics) == {"profile", "records", "runs", "reproduced", "bes", "cmaes", "ingo", "mmes", "sabo"}
    # per method of the paper's five (not the deviations sabo_inverse, sabo_small_rho): the median over the
    # cells (d100 at noise 0% and 60%) of the selected test accuracy; MMES has a cell whose seeds all
    # diverged, so its headline is null rather than the other cell's number
    for method in ("bes", "cmaes", "ingo", "sabo"):
        cells = [value for (_, _, m), value in expected.items() if m == method]
        assert len(cells) == 2 and metrics[method] == pytest.approx(round(float(np.median(cells)), 2), abs=1e-9)
    assert metrics["mmes"] is None

    with open(first / "noisy_labels_curves.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(expected) * 3  # the selected configuration's run (1 seed) of each cell, 3 points
    sabo_0 = [float(r["test_accuracy"]) for r in rows if (r["method"], r["noise_rate"]) == ("sabo", "0.0")]
    assert sabo_0[-1] == pytest.approx(expected[("d100", 0.0, "sabo")] / 100, abs=1e-6)


def test_the_prompt_report_of_the_offline_profile_has_an_empty_table(tmp_path):
    first, second = tmp_path / "from_runs", tmp_path / "from_table"
    params = str(ROOT / "params.yaml")
    assert report("prompt", params, first, "--runs-dir", str(tmp_path / "runs")) == 0
    assert read_table_records(first / "prompt_tuning_runs.parquet") == []
    assert report("prompt", params, second, "--from-table", str(first / "prompt_tuning_runs.parquet")) == 0
    assert files_of(second) == files_of(first)
    metrics = json.loads((first / "prompt_tuning_metrics.json").read_text())
    assert metrics == {"profile": "offline", "records": 0, "runs": 0, "reproduced": 0}  # no method has a cell
    assert not (first / "prompt_tuning_curves.csv").exists()  # the prompt study plots no curves


def dvc(cwd, *args) -> dict:
    out = subprocess.run([sys.executable, "-m", "dvc", *args, "--json"], cwd=cwd, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def dvc_text(cwd, *args) -> list[str]:
    """The lines `dvc ARGS` prints, as a terminal shows them (its plain table)."""
    out = subprocess.run([sys.executable, "-m", "dvc", *args], cwd=cwd, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def dvc_repo(path):
    """An empty DVC repository (no git) with the project's dvc.yaml."""
    import shutil

    path.mkdir()
    subprocess.run([sys.executable, "-m", "dvc", "init", "--no-scm", "-q"], cwd=path, check=True)
    shutil.copy(ROOT / "dvc.yaml", path)
    return path


def test_dvc_metrics_show_the_report_outcomes(tiny_study, tmp_path):
    """`dvc metrics show` reads what the report wrote, with dvc.yaml's metrics definitions (the plots, the
    reports' own figures, are checked in tests/test_dvc_views.py), in lines of at most WIDTH characters."""
    from replication.outcomes import WIDTH

    params, runs = tiny_study
    repo = dvc_repo(tmp_path / "repo")
    assert report("synthetic", params, repo / "results", "--runs-dir", str(runs)) == 0

    metrics = dvc(repo, "metrics", "show")
    shown = next(iter(metrics.values()))["data"]["results/synthetic_metrics.json"]["data"]
    assert shown == json.loads((repo / "results" / "synthetic_metrics.json").read_text())
    lines = dvc_text(repo, "metrics", "show", "results/synthetic_metrics.json")
    assert lines[0].split() == ["Path", "ingo", "profile", "records", "reproduced", "runs", "sabo"]
    assert max(map(len, lines)) <= WIDTH


def test_dvc_metrics_show_fits_and_shows_small_errors_as_decades(tiny_study, tmp_path):
    """Each study's metrics file, with its widest plausible numbers, fits WIDTH columns in `dvc metrics
    show FILE`, and so does the table of all four files; a final error of 1e-8, which DVC's rounding to
    5 decimals showed as 0.0, is shown as its decade, -8.0."""
    from replication.outcomes import HEADLINE_METHODS, WIDTH, write_outcomes

    params, runs = tiny_study
    repo = dvc_repo(tmp_path / "repo")
    records = records_of(params, runs)
    for r in records:  # every run converged to within 1e-8 (SABO) or diverged (INGO: an error that overflowed)
        r["result"]["final"]["error"] = 1e-8 if r["config"]["method"] == "sabo" else math.inf
    claims = [{"verdict": "reproduced"}, {"verdict": "not reproduced"}]
    write_outcomes(repo / "results", "synthetic", profile="tiny", records=records, runs=len(records),
                   claims=claims, outcomes=get_study("synthetic").outcomes(yaml.safe_load(open(params)), records))
    written = json.loads((repo / "results" / "synthetic_metrics.json").read_text())
    assert (written["sabo"], written["ingo"], written["reproduced"]) == (-8.0, None, 1)
    header, row = dvc_text(repo, "metrics", "show", "results/synthetic_metrics.json")
    shown = dict(zip(header.split(), row.split()))
    assert shown["sabo"] == "-8.0" and "ingo" not in shown  # DVC leaves a null (not finite) out of its table

    widest = {"profile": "reduced", "records": 99999, "runs": 99999, "reproduced": 99,
              **dict.fromkeys(HEADLINE_METHODS, -13.05)}  # e.g. a decade of -13.05, an accuracy of 100.0
    for study in ("synthetic", "image", "bbob", "prompt"):
        name = get_study(study).REPORT_NAME
        write_json(repo / "results" / f"{name}_metrics.json", widest)
        lines = dvc_text(repo, "metrics", "show", f"results/{name}_metrics.json")
        assert len(lines) == 2 and max(map(len, lines)) <= WIDTH, (name, lines)
    lines = dvc_text(repo, "metrics", "show")
    assert len(lines) == 5 and max(map(len, lines)) <= WIDTH, lines
