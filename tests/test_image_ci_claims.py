"""The CI-sized image study: claims and selected accuracies do not regress against ci_expected.json.

Runs the `ci` profile of params.yaml on the digits stand-in (d = 100, noise 0% and 60%, every
method and reading of rho over its whole grid, 1 seed, T = 30; about 2.5 minutes on 2 cores)
through the real command line, then checks the report against
replication/image/ci_expected.json: every claim recorded as reproduced still is, and every
selected test accuracy is at most ``SCORE_TOLERANCE`` points below its recorded value
(replication/image/report.py says why that tolerance). Regenerate the file deliberately with
`sabo-bench report image --profile ci --out results/ci --record-expected replication/image/ci_expected.json`.
"""
from pathlib import Path

import pytest

pytest.importorskip("umap")  # the `image` extra, installed by the dev extra
from replication.cli import main
from replication.storage import read_json

ROOT = Path(__file__).resolve().parents[1]
EXPECTED = ROOT / "replication" / "image" / "ci_expected.json"


def test_expected_file_covers_every_cell_and_method_of_the_ci_profile():
    import yaml

    from replication.image.study import configs

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["image"]["profile"] = "ci"
    cells = {f"{c.setting}/noise {c.problem['noise_rate']:.0%}/{c.method}" for c in configs(params)}
    assert set(read_json(EXPECTED)["scores"]) == cells


@pytest.mark.slow
def test_ci_profile_does_not_regress(tmp_path, monkeypatch, umap_cache):
    monkeypatch.setenv("SABO_BENCH_UMAP_CACHE", str(umap_cache))
    common = ["--params", str(ROOT / "params.yaml"), "--profile", "ci", "--runs-dir", str(tmp_path / "runs")]
    assert main(["run", "image", *common, "--workers", "2", "--no-track", "--quiet"]) == 0
    assert main(["report", "image", *common, "--out", str(tmp_path / "results"), "--no-track",
                 "--check-claims", str(EXPECTED)]) == 0
