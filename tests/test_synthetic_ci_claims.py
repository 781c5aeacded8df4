"""The CI-sized synthetic study: the claims that held when ci_expected.json was recorded still hold.

Runs the `ci` profile of params.yaml (d = 200 with N = 50 for 1500 iterations and N = 100 for
1000, every function and method, 2 seeds; about 3 minutes on 2 cores) through the real
command line, then checks the claim verdicts against replication/synthetic/ci_expected.json.
Regenerate that file deliberately with
`sabo-bench report synthetic --profile ci --out results/ci --record-expected replication/synthetic/ci_expected.json`.
"""
from pathlib import Path

import pytest

from replication.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_ci_profile_claims_still_hold(tmp_path):
    common = ["--params", str(ROOT / "params.yaml"), "--profile", "ci", "--runs-dir", str(tmp_path / "runs")]
    assert main(["run", "synthetic", *common, "--workers", "2", "--no-track", "--quiet"]) == 0
    expected = ROOT / "replication" / "synthetic" / "ci_expected.json"
    assert main(["report", "synthetic", *common, "--out", str(tmp_path / "results"), "--no-track",
                 "--check-claims", str(expected)]) == 0
