"""The MLflow comparison of docs/mlflow.md, followed in a real browser.

The page's steps, in its order, in a fresh directory (no runs, no MLflow store), for the `ci`
profile: its `sabo-bench run` command makes SABO's and INGO's records (BES was run before, as by
someone who ran the whole profile: the comparison must leave it out); its `mlflow ui` command
starts serving on a free port of 127.0.0.1 while its `sabo-bench track ... --wait-ui` command
waits for it and prints the comparison link; headless Chromium (Debian's ``chromium``, driven by
the Playwright package: Playwright's own browser download is not used) opens the link. The page
must list SABO's and INGO's group runs (method first in their names) as its only rows and draw
each one's `error_log10_median` curve, the median error in decades, with exactly the points
MLflow holds, against evaluations. A screenshot is saved to ``$SABO_BENCH_ARTIFACTS`` (CI sets
it; otherwise the test's temporary directory) and its path printed.

Chromium: ``$SABO_BENCH_CHROMIUM``, else ``chromium`` or ``chromium-browser`` on PATH; without
one the test is skipped (`.ci/run` installs it, and under CI=true the skip fails the run).
The server runs in its own process group and is stopped at the end, with everything it started.
"""
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from helpers import chromium, for_selection, mlflow_steps, readme_filter

mlflow = pytest.importorskip("mlflow")  # the replication extra
sync_api = pytest.importorskip("playwright.sync_api")  # the dev extra

ROOT = Path(__file__).resolve().parents[1]
SETTING, FUNCTION, METHODS = "d200_N100", "ellipsoid", ("sabo", "ingo")
CHART = "error_log10_median"
PAGE_S = 60           # the first load of the UI's JavaScript on a busy machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def live_members(pgid: int) -> list[int]:
    """Processes of group ``pgid`` that are not zombies (from /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended meanwhile
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


@contextmanager
def mlflow_ui(command: str, port: int, log: Path):
    """The documented `mlflow ui` ``command`` serving at 127.0.0.1:``port``, until the block ends; then no
    process of it is left.

    One worker and no job runner (``MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false``): the UI needs
    neither, and each would import MLflow once more on a machine the tests already keep busy.
    """
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    words = shlex.split(command)
    assert words[:2] == ["mlflow", "ui"]
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "mlflow", *words[1:], "--host", "127.0.0.1",
                                 "--port", str(port), "--workers", "1"],
                                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        yield proc
    finally:
        for sig, grace in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline:
                proc.poll()  # reap the leader
                if not live_members(proc.pid):
                    break
                time.sleep(0.2)
            if not live_members(proc.pid):
                break
        proc.wait(timeout=10)
        assert not live_members(proc.pid), f"`mlflow ui` left processes behind: {live_members(proc.pid)}"


def plotted_curves(page, metric: str) -> dict[str, tuple[list, list]]:
    """``run name -> (x, y)`` of the line chart card titled ``metric`` (Plotly's data on the page)."""
    card = page.get_by_test_id("experiment-view-compare-runs-card").filter(
        has=page.get_by_role("heading", name=metric, exact=True))
    card.wait_for(timeout=PAGE_S * 1000)
    card.scroll_into_view_if_needed()  # MLflow draws a chart once it is in view
    plot = card.locator(".js-plotly-plot")
    plot.wait_for(timeout=PAGE_S * 1000)
    traces = plot.evaluate("gd => gd.data.map(t => ({name: t.name, x: Array.from(t.x), y: Array.from(t.y)}))")
    # MLflow draws each run twice (line and hover markers) with the same points
    return {t["name"]: (t["x"], t["y"]) for t in traces}


def test_the_documented_steps_compare_sabo_and_ingo_in_decades_in_mlflow_ui(tmp_path, monkeypatch, capsys):
    browser_path = chromium()
    if browser_path is None:
        pytest.skip("chromium is not installed (no `chromium` on PATH and no $SABO_BENCH_CHROMIUM): "
                    "`apt-get install chromium` on Debian")
    from replication.cli import main

    monkeypatch.chdir(tmp_path)  # a fresh directory: no runs/, no mlflow.db
    shutil.copyfile(ROOT / "params.yaml", tmp_path / "params.yaml")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # the documented default store, sqlite:///mlflow.db
    selection = {"profile": "ci", "setting": SETTING, "function": FUNCTION}
    run_command, ui_command, track_command = mlflow_steps()
    before = ["run", "synthetic", "--profile", "ci", "--setting", SETTING, "--function", FUNCTION, "--method", "bes"]
    assert main([*before, "--quiet"]) == 0
    # docs/mlflow.md step 1
    words = for_selection(run_command, **selection)
    assert words[words.index("--method") + 1:][:2] == list(METHODS)
    assert main([*words[1:], "--workers", "2", "--quiet"]) == 0
    assert "4 runs finished" in capsys.readouterr().out

    port = free_port()
    ui = f"http://127.0.0.1:{port}"
    log = tmp_path / "mlflow-ui.log"
    with mlflow_ui(ui_command, port, log):  # step 2
        # step 3: logs nothing new (step 1 did), waits for the UI that is still starting, prints the link
        words = for_selection(track_command, **selection)
        assert "--wait-ui" in words
        assert main([*words[1:], "--ui", ui]) == 0
        out = capsys.readouterr().out
        assert "0 records logged" in out and "4 already there" in out
        assert "no MLflow UI answers" not in out, f"`mlflow ui` did not start in time:\n{log.read_text()[-3000:]}"
        [url] = re.findall(r"compare the methods .*: (http\S+)", out)
        state = urllib.parse.parse_qs(url.split("?", 1)[1])
        assert state["searchFilter"] == [readme_filter("ci", SETTING, FUNCTION)]  # the filter the page shows

        client = mlflow.tracking.MlflowClient("sqlite:///mlflow.db")
        exp = client.get_experiment_by_name("synthetic")
        assert exp.tags["mlflow.experimentKind"] == "custom_model_development"  # not MLflow's GenAI layout
        groups = {g.data.tags["sabo_bench_method"]: g for g in client.search_runs([exp.experiment_id],
                                                                                state["searchFilter"][0])}
        assert sorted(groups) == sorted(METHODS)  # BES is logged, and left out
        names = {m: f"{m} · {SETTING}/{FUNCTION} [ci]" for m in METHODS}
        assert {m: g.info.run_name for m, g in groups.items()} == names

        artifacts = Path(os.environ.get("SABO_BENCH_ARTIFACTS") or tmp_path)
        artifacts.mkdir(parents=True, exist_ok=True)
        shot = artifacts / "mlflow_comparison.png"
        with sync_api.sync_playwright() as pw:
            # as root (CI containers) Chromium refuses to start inside its sandbox
            browser = pw.chromium.launch(executable_path=browser_path,
                                         args=["--no-sandbox", "--disable-dev-shm-usage"])
            try:
                page = browser.new_page(viewport={"width": 1600, "height": 1000})
                page.goto(url, timeout=PAGE_S * 1000)  # step 4
                # the group runs themselves are the rows (not a collapsed parent)
                for name in names.values():
                    page.get_by_role("link", name=name, exact=True).first.wait_for(timeout=PAGE_S * 1000)
                curves = plotted_curves(page, CHART)
                page.get_by_text("Step = number of function evaluations").first.wait_for(timeout=PAGE_S * 1000)
                assistant = page.get_by_role("button", name="Close", exact=True)  # MLflow 3's chat panel
                if assistant.count():  # out of the screenshot's way, where this MLflow has one
                    assistant.first.click()
                page.screenshot(path=str(shot))
            finally:
                browser.close()
    with capsys.disabled():  # shown in CI's log, not only on failure
        print(f"\n{__name__}: screenshot of the MLflow comparison: {shot}")

    assert set(curves) == set(names.values())
    for method, group in groups.items():
        history = client.get_metric_history(group.info.run_id, CHART)
        x, y = curves[names[method]]
        assert x == [h.step for h in history] and y == pytest.approx([h.value for h in history])
        # in decades: the median over the seeds of log10(error), at each evaluation count of the records
        seeds = [json.loads(p.read_text()) for p in (tmp_path / "runs" / "synthetic" / SETTING / method).glob("*.json")]
        errors = np.array([r["result"]["curve"]["error"] for r in seeds])
        assert len(seeds) == 2 and y == pytest.approx(list(np.median(np.log10(errors), axis=0)), rel=1e-9)
        # against evaluations: the last point is the budget of T = 1000 iterations in evaluations
        per_iteration = 2 * 100 if method == "sabo" else 100
        assert x[0] == 0 and x[-1] == 1000 * per_iteration
        assert y[-1] < y[0] - 1  # both methods gain more than a decade on the ellipsoid
    assert shot.stat().st_size > 10_000
