"""The CI-sized image study: claims and selected accuracies do not regress against ci_expected.json.

Runs the `ci` profile of params.yaml on the digits stand-in (d = 100, noise 0% and 60%, every
method and reading of rho over its whole grid, 1 seed, T = 30; about 1-2.5 minutes on 2 cores)
through the real command line, then checks the report against
replication/image/ci_expected.json: every claim recorded as reproduced still is, and every
selected test accuracy is at most its tolerance below its recorded value. The recorded value is
the mean over seeds, the tolerance comes from the spread measured across seeds and numerical
environments (emulated CPUs here, other machines), so that the check holds on any machine:
`benchmarks/ci_spread.py` measures both and writes the file (its docstring gives the command).

The second test runs the same check in a *foreign numerical environment*: OpenBLAS forced onto
another CPU's kernels (``OPENBLAS_CORETYPE``) and NumPy onto its baseline SIMD level
(``NPY_DISABLE_CPU_FEATURES``). The last bits of the run's sums differ from a native run's, as
they would on a stranger's machine: a result that depends on the machine more than its
tolerance allows fails here, on the developers' machine, before it fails on anyone else's.
"""
import os
import subprocess
import sys
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
    expected = read_json(EXPECTED)
    checked, not_checked = set(expected["scores"]), set(expected["spread"]["not_checked"])
    assert checked | not_checked == cells and not checked & not_checked  # every cell measured, each checked or not
    assert set(expected["score_means"]["mean of the scores"]["keys"]) == cells  # all checked together
    for key in checked:  # a checked score can show a regression: its floor is above chance (10 classes)
        assert expected["scores"][key] - expected["score_tolerance"][key] > 10.0


@pytest.mark.slow
def test_ci_profile_does_not_regress(tmp_path, monkeypatch, umap_cache):
    monkeypatch.setenv("SABO_BENCH_UMAP_CACHE", str(umap_cache))
    common = ["--params", str(ROOT / "params.yaml"), "--profile", "ci", "--runs-dir", str(tmp_path / "runs")]
    assert main(["run", "image", *common, "--workers", "2", "--no-track", "--quiet"]) == 0
    assert main(["report", "image", *common, "--out", str(tmp_path / "results"), "--no-track",
                 "--check-claims", str(EXPECTED)]) == 0


#: another x86-64 CPU's kernels (SSE3, no FMA) and NumPy's baseline SIMD level
FOREIGN = {"OPENBLAS_CORETYPE": "Prescott", "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR"}


@pytest.mark.slow
def test_ci_profile_does_not_regress_on_a_foreign_cpu(tmp_path, umap_cache):
    from replication.engine import numerics

    env = {**os.environ, **FOREIGN, "SABO_BENCH_UMAP_CACHE": str(umap_cache),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    common = ["--params", str(ROOT / "params.yaml"), "--profile", "ci", "--runs-dir", str(tmp_path / "runs")]
    cli = [sys.executable, "-m", "replication.cli"]
    run = subprocess.run([*cli, "run", "image", *common, "--workers", "2", "--no-track", "--quiet"], env=env,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    record = next((tmp_path / "runs").rglob("*.json"))
    foreign = read_json(record)["provenance"]["numerics"]
    if foreign == numerics():
        pytest.skip(f"this machine's BLAS and NumPy cannot emulate another CPU ({foreign})")
    report = subprocess.run([*cli, "report", "image", *common, "--out", str(tmp_path / "results"), "--no-track",
                             "--check-claims", str(EXPECTED)], env=env, capture_output=True, text=True)
    assert report.returncode == 0, report.stderr
