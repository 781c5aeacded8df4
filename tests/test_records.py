"""The schema of a run record (replication.records): what it refuses, in one line naming the key, and that every
record the suite has written passes it (a record it refused would be moved aside and recomputed)."""
import copy
import math
from pathlib import Path

import pytest
from helpers import small_config

from replication.engine import execute
from replication.records import schema_problem
from replication.table import read_table_records

RESULTS = Path(__file__).resolve().parents[1] / "results"


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    return execute(small_config("sabo", dim=6, popsize=6, T=20), tmp_path_factory.mktemp("runs"))


@pytest.mark.parametrize("table", sorted(RESULTS.glob("*_runs.parquet")), ids=lambda p: p.name)
def test_every_committed_record_passes(table):
    """The committed run tables hold records of several versions (with and without provenance.numerics and
    curve_time_unix_s; diverged runs; inf in curves): reading them checks each one."""
    for row in read_table_records(table):
        assert schema_problem(row) is None


def test_a_record_of_each_kind_the_engine_writes_passes(record, tmp_path):
    assert schema_problem(record) is None
    zero_shot = execute(small_config("sabo", dim=6, popsize=6, T=0), tmp_path)  # f_best NaN, no optimizer
    assert math.isnan(zero_shot["result"]["final"]["f_best"]) and schema_problem(zero_shot) is None


def _set(path, value):
    def change(r):
        node = r
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value(node[path[-1]]) if callable(value) else value
    return change


WRONG = [  # (change, the one line said)
    (_set(["result", "curve"], "abc"), "result.curve: Input should be a valid dictionary"),
    (_set(["result", "final"], {}), "result: final must be the curve's last point"),
    (_set(["result", "final", "error"], "0.5"), "result.final.error: must be a number (got str)"),
    (_set(["result", "final", "error"], True), "result.final.error: must be a number (got bool)"),
    (_set(["result", "curve", "error"], lambda v: v[1:]),
     "result: curve: columns must all have one length >= 1 (lengths nit 21, nfev 21, f_best 21, error 20, f_mean 21)"),
    (_set(["result", "curve", "error"], lambda v: [math.nan] * len(v)),
     "result: curve: column error holds no number (every value is NaN)"),
    (_set(["result", "curve", "nit"], lambda v: v[::-1]), "result: curve: nit must be non-decreasing integers >= 0"),
    (_set(["result", "curve", "nfev"], lambda v: [float(x) for x in v]),
     "result: curve: nfev must be non-decreasing integers >= 0"),
    (lambda r: r["result"]["curve"].pop("f_best"), "result: curve: lacks the column(s) f_best"),
    (_set(["result", "status"], "pending"), "result.status: Input should be 'completed' or 'diverged'"),
    (_set(["result", "stats", "safeguard_perturbation"], "3"),
     "result.stats.safeguard_perturbation: must be a number or a mapping (got str)"),
    (_set(["result", "evals_per_iteration"], -1), "result.evals_per_iteration: Input should be greater than or equal"),
    (lambda r: r.pop("result"), "result: Field required"),
    (_set(["provenance"], {}), "provenance.versions: Field required; provenance.git_revision: Field required; "
                               "provenance.host: Field required (and 5 more problems)"),
    (_set(["provenance", "wall_time_s"], "3.5"), "provenance.wall_time_s: must be a number (got str)"),
    (_set(["provenance", "wall_time_s"], -1.0), "provenance.wall_time_s: must be a finite number of seconds >= 0"),
    (_set(["provenance", "finished_utc"], "2026-01-01T00:00:00"),
     "provenance.finished_utc: must be an ISO 8601 time with a time zone (got '2026-01-01T00:00:00')"),
    (_set(["provenance", "resumed"], 1.0), "provenance.resumed: Input should be a valid integer"),
    (_set(["provenance", "curve_time_unix_s"], lambda v: v[:3]),
     "provenance.curve_time_unix_s: must hold one time per curve point (21; got 3)"),
    (_set(["provenance", "curve_time_unix_s", 0], math.inf),
     "provenance.curve_time_unix_s.0: must be a finite time in seconds or null (got inf)"),
    (_set(["schema"], True), "schema: must be 1, the record layout this version reads (got True)"),
    (_set(["config_hash"], 7), "config_hash: Input should be a valid string"),
]


@pytest.mark.parametrize("change,said", WRONG, ids=[said[:60] for _, said in WRONG])
def test_a_record_of_the_wrong_shape_is_refused_in_one_line_naming_the_key(record, change, said):
    bad = copy.deepcopy(record)
    change(bad)
    problem = schema_problem(bad)
    assert problem.startswith(said) and "\n" not in problem


def test_keys_a_later_version_adds_are_left_alone(record):
    later = copy.deepcopy(record)
    later["result"]["new_part"] = {"anything": [1, "x"]}
    later["provenance"]["new_time"] = "soon"
    assert schema_problem(later) is None
    assert schema_problem([record]) == "not a JSON object but list"
