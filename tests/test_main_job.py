"""benchmarks/main_job.py (the main job's time from records or run tables) and benchmarks/main_job_today.py (projected
from short runs of the current code): what they add up, not how fast anything ran."""
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from helpers import benchmark_script, tiny_params

ROOT = Path(__file__).resolve().parents[1]


def test_packing_is_longest_first_on_the_workers():
    main_job = benchmark_script("main_job")
    assert main_job.packed([5.0, 4.0, 3.0, 3.0], 2) == 8.0   # 5+3 | 4+3
    assert main_job.packed([5.0, 4.0, 3.0, 3.0], 1) == 15.0
    assert main_job.packed([7.0, 1.0, 1.0], 4) == 7.0       # the longest run is the floor


def test_the_committed_tables_add_up_to_their_runs_wall_times(capsys):
    table = ROOT / "results" / "ci" / "synthetic_runs.parquet"
    benchmark_script("main_job").main(["--tables", str(table)])
    out = capsys.readouterr().out
    rows = pq.read_table(table, columns=["provenance.wall_time_s"]).to_pylist()
    work = sum(r["provenance.wall_time_s"] for r in rows) / 60
    [line] = [x for x in out.splitlines() if x.startswith("all ")]
    assert f"{len(rows)} runs: work {work:.1f} min = {work / 2:.1f} min on 2 workers" in line


def test_the_projection_from_short_runs_covers_every_stage(tmp_path, capsys):
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(tiny_params()))
    benchmark_script("main_job_today").main(["--params", str(params), "--studies", "synthetic", "--fraction", "0.2"])
    out = capsys.readouterr().out
    stages = re.findall(r"^synthetic/d10_N6/(\w+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)$", out, re.MULTILINE)
    assert sorted(s[0] for s in stages) == ["ingo", "sabo"]
    assert all(int(s[1]) == 4 for s in stages)  # 2 functions x 2 seeds per stage
    projected = float(re.search(r"projected main job \(run stages\): ([\d.]+) min", out).group(1))
    assert projected == pytest.approx(sum(float(s[3]) for s in stages), abs=0.1 * len(stages) + 1e-9)
