"""What `sabo-bench run` shows while runs execute (replication.progress): the bar, plain lines, the share of work."""
import re
import time

import pytest
from helpers import small_config

from replication import progress as progress_module
from replication.executors import run_configs
from replication.progress import Progress

CLOCK = r"\d\d:\d\d(:\d\d)?"


class RecordingBar:
    """Stands in for tqdm: keeps the total, every count shown and every postfix."""

    bars: list = []

    def __init__(self, *, total, initial=0, **_):
        self.total, self.n, self.shown, self.postfixes = total, initial, [], []
        RecordingBar.bars.append(self)

    def set_postfix_str(self, text, refresh=True):
        self.postfixes.append(text)

    def refresh(self):
        self.shown.append(self.n)

    def close(self):
        pass


@pytest.fixture
def bar(monkeypatch):
    monkeypatch.setattr(progress_module, "tqdm", RecordingBar)
    RecordingBar.bars = []
    return RecordingBar


def test_the_bar_starts_from_the_recorded_share_and_ends_at_its_total(tmp_path, bar):
    """One of three equal runs recorded: the bar opens at a third of the work (its time calibrates all three) and
    ends exactly at its total with the ETA at zero (a float a hair above it made tqdm show a negative ETA)."""
    configs = [small_config("ingo", dim=10, T=20, seed=s) for s in range(3)]
    run_configs(configs[:1], tmp_path, progress=False)
    run_configs(configs, tmp_path, progress="bar")
    shown = bar.bars[-1].shown
    assert shown[0] == pytest.approx(100 / 3)
    assert all(0 <= n <= 100 for n in shown) and shown[-1] == 100.0
    assert bar.bars[-1].postfixes[-1].startswith("ETA 00:00, 3/3 runs")


def test_the_bar_shows_an_eta_from_earlier_records_and_from_running_runs(tmp_path, bar, monkeypatch):
    from replication import executors

    configs = [small_config("ingo", dim=10, T=40, seed=s) for s in range(3)]
    monkeypatch.setattr(executors, "REPORT_EVERY_S", 0.0)
    monkeypatch.setattr(progress_module, "ETA_EVERY_S", 0.0)
    run_configs(configs[:1], tmp_path, progress=True)
    first = bar.bars[0].postfixes
    assert first[0].startswith("ETA: measuring, 0/1 runs")
    assert any(p.startswith("ETA ") and "0/1 runs" in p for p in first[1:])  # the run's reports, before it ends
    bar.bars = []
    run_configs(configs, tmp_path, progress=True)
    again = bar.bars[0].postfixes
    assert again[0].startswith("ETA ") and "1/3 runs" in again[0]   # calibrated by the earlier record
    assert again[-1].startswith("ETA 00:00, 3/3 runs")


def test_lines_say_when_runs_start_how_far_they_are_and_when_they_end(tmp_path, monkeypatch, capsys):
    """Plain lines on stderr, each starting with the label: the start (runs to compute, workers, an ETA already,
    from a record of another run of the study: ``calibration``), progress lines, the end (runs computed, time)."""
    monkeypatch.setattr(progress_module, "LINE_EVERY_S", 0.0)
    other = run_configs([small_config("ingo", dim=10, T=40, seed=9)], tmp_path / "other", progress="none")
    configs = [small_config("ingo", dim=10, T=40, seed=s) for s in range(3)]
    capsys.readouterr()
    run_configs(configs, tmp_path / "runs", workers=2, progress="lines", label="synthetic d10_N6 ingo",
                calibration=other)
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert captured.out == "" and "\r" not in captured.err  # nothing redrawn
    assert all(line.startswith("synthetic d10_N6 ingo: ") for line in lines)
    texts = [line.removeprefix("synthetic d10_N6 ingo: ") for line in lines]
    assert re.fullmatch(rf"3 of 3 runs to compute on 2 workers \(0 recorded before\); ETA {CLOCK} \(about "
                        r"\d\d:\d\d\)", texts[0])
    middle = texts[1:-1]
    assert middle and all(re.fullmatch(rf"[0-3]/3 runs, \d+% of the estimated work, {CLOCK} elapsed, ETA {CLOCK} "
                                       r"\(about \d\d:\d\d\)", text) for text in middle)
    assert re.fullmatch(rf"3 runs computed in {CLOCK}, 3/3 recorded; first prediction {CLOCK} in all, at {CLOCK}",
                        texts[-1])


def test_lines_say_so_when_there_is_nothing_to_compute(tmp_path, capsys):
    configs = [small_config("ingo", dim=10, T=10, seed=s) for s in range(2)]
    run_configs(configs, tmp_path, progress="none")
    run_configs(configs, tmp_path, progress="lines", label="x")
    assert capsys.readouterr().err == "x: all 2 runs recorded: nothing to compute\n"


def test_lines_keep_coming_while_no_run_reports(tmp_path, monkeypatch, capsys):
    """The heartbeat thread prints on time while the main process is busy (a run computed in it, ``--workers 1``)."""
    monkeypatch.setattr(progress_module, "LINE_EVERY_S", 0.02)
    monkeypatch.setattr(progress_module, "ETA_EVERY_S", 0.01)
    config = small_config("ingo")
    shown = Progress([config], {}, [config], {config.hash: 1.0}, tmp_path, None, mode="lines", label="x")
    shown.begin(1)
    seen, deadline = "", time.monotonic() + 60
    while seen.count("elapsed") < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
        seen += capsys.readouterr().err
    shown.close()
    assert seen.count("elapsed") >= 2
    assert "0/1 runs, 0% of the estimated work" in seen and "ETA once a run has reported" in seen


def test_a_progress_mode_outside_the_list_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"progress must be one of \('bar', 'lines', 'none'\) or a bool \(got 'x'\)"):
        run_configs([small_config("ingo")], tmp_path, progress="x")


def test_sabo_bench_run_prints_lines_where_stderr_is_no_terminal(tmp_path, capsys):
    """Under `dvc repro` or into a log, `sabo-bench run` prints lines without being asked; --quiet prints nothing, and
    --quiet with --progress is refused."""
    import yaml
    from helpers import tiny_params

    from replication.cli import main

    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(tiny_params()))
    common = ["run", "synthetic", "--params", str(params), "--runs-dir", str(tmp_path / "runs"), "--no-track"]
    assert main([*common, "--method", "ingo", "--seed", "0"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("synthetic ingo: 2 of 2 runs to compute on 1 worker (0 recorded before); ETA ")
    assert err[-1].startswith("synthetic ingo: 2 runs computed in ")
    assert main([*common, "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    with pytest.raises(SystemExit) as stop:
        main([*common, "--quiet", "--progress", "lines"])
    assert stop.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


def test_eta_accuracy_reads_the_bar_as_it_is_drawn():
    """benchmarks/eta_accuracy.py reads the share, the elapsed time and the ETA off the bar a terminal shows: a
    change of the bar's format must not leave it reading nothing."""
    import io

    from helpers import benchmark_script
    from tqdm import tqdm

    script = benchmark_script("eta_accuracy")
    out = io.StringIO()
    drawn = tqdm(total=100.0, desc="synthetic", bar_format=progress_module.BAR_FORMAT, file=out, ncols=150)
    drawn.n = 37.5
    drawn.set_postfix_str("ETA 1:02:03, 5/108 runs, last d200_N100/levy/turbo/seed0")
    drawn.close()
    assert script.READING.findall(out.getvalue().encode())[-1] == (b"38", b"00:00", b"1:02:03")
    assert script.seconds(b"1:02:03") == 3723.0 and script.seconds(b"?") is None
    readings = [(10.0, 80.0, 10), (50.0, 110.0, 45), (90.0, 100.0, 95)]  # (time, predicted end, share shown)
    assert script.points(100.0, readings) == ("10%: -20% (bar 10%); 25%: -20% (bar 10%); 50%: +10% (bar 45%); "
                                              "75%: +10% (bar 45%); 90%: +0% (bar 95%)")
