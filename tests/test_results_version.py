"""A release of the package keeps every record: run identity holds the results version, not the package's.

``replication.config.code_version`` is ``sabo.RESULTS_VERSION`` + the optimizer's revision; the
package version (``sabo.__version__``, 0.2.0 from this release on) is in no config. Were it, the
bump would have made every committed record stale: the configs built from ``params.yaml`` today
must hash to the ``config_hash`` the committed run table holds for the same runs.
"""
from pathlib import Path

import pytest

import baselines
import sabo
from replication.config import code_version
from replication.params import read_params
from replication.synthetic.runs import configs

pq = pytest.importorskip("pyarrow.parquet")

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "results" / "synthetic_runs.parquet"
RUN = {"setting": "d200_N50", "method": "ingo", "problem.name": "levy", "seed": 1}  # one of the table's rows


def committed_hash() -> str:
    rows = pq.read_table(TABLE, columns=["config_hash", *RUN]).to_pylist()
    [row] = [r for r in rows if all(r[k] == v for k, v in RUN.items())]
    return row["config_hash"]


def todays_config():
    [config] = [c for c in configs(read_params(ROOT / "params.yaml")) if c.setting == RUN["setting"]
                and c.method == RUN["method"] and c.problem["name"] == RUN["problem.name"] and c.seed == RUN["seed"]]
    return config


def test_the_package_version_is_not_the_results_version():
    assert sabo.__version__ == "0.2.0" and sabo.RESULTS_VERSION == "0.1.0"
    assert code_version("ingo", {}) == f"0.1.0+ingo.r{baselines.find('ingo').revision}"
    assert code_version("zero_shot", {}) == "0.1.0"  # no registered optimizer: the results version alone


def test_a_committed_records_config_hash_is_unchanged_by_the_release():
    config = todays_config()
    assert config.code_version.startswith(f"{sabo.RESULTS_VERSION}+ingo.r")
    assert config.hash == committed_hash()


def test_the_package_version_does_not_enter_a_config_and_the_results_version_does(monkeypatch):
    before = todays_config().hash
    monkeypatch.setattr(sabo, "__version__", "9.9.9")
    assert todays_config().hash == before
    monkeypatch.setattr(sabo, "RESULTS_VERSION", "0.1.1")
    assert todays_config().hash != before
