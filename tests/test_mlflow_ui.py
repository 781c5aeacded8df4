"""The MLflow comparison of docs/mlflow.md, followed in a real browser.

A `ci`-profile run of SABO and INGO on one setting and function is logged to a fresh MLflow
database; `mlflow ui` serves it on a free port of 127.0.0.1; the page's `sabo-bench track`
command prints the comparison link; headless Chromium (Debian's ``chromium``, driven by the
Playwright package: Playwright's own browser download is not used) opens it. The page must list
the two group runs as rows and draw each one's `error_median` curve with exactly the points MLflow
holds, against evaluations. A screenshot is saved to ``$SABO_BENCH_ARTIFACTS`` (CI sets it;
otherwise the test's temporary directory) and its path printed.

Chromium: ``$SABO_BENCH_CHROMIUM``, else ``chromium`` or ``chromium-browser`` on PATH; without
one the test is skipped (`.ci/run` installs it, and under CI=true the skip fails the run).
The server runs in its own process group and is stopped at the end, with everything it started.
"""
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

import pytest
from helpers import chromium, readme_comparison, readme_filter

mlflow = pytest.importorskip("mlflow")  # the replication extra
sync_api = pytest.importorskip("playwright.sync_api")  # the dev extra

ROOT = Path(__file__).resolve().parents[1]
SETTING, FUNCTION, METHODS = "d200_N100", "ellipsoid", ("sabo", "ingo")
SERVER_START_S = 150  # `mlflow ui` imports MLflow and opens the database: 20 s on 2 busy cores, 60 s seen at worst
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
def mlflow_ui(db: Path, port: int, log: Path):
    """`mlflow ui` on ``db`` at 127.0.0.1:``port``, until the block ends; then no process of it is left.

    One worker and no job runner (``MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false``): the UI needs
    neither, and each would import MLflow once more on a machine the tests already keep busy.
    """
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", f"sqlite:///{db}",
                                 "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
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


def wait_until_serving(proc, port: int, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"`mlflow ui` exited with status {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError:  # not listening yet
            pass
        time.sleep(0.5)
    pytest.fail(f"`mlflow ui` did not answer within {SERVER_START_S} s:\n{log.read_text()[-3000:]}")


def plotted_curves(page, metric: str) -> dict[str, tuple[list, list]]:
    """``run name -> (x, y)`` of the line chart card titled ``metric`` (Plotly's data on the page)."""
    card = page.get_by_test_id("experiment-view-compare-runs-card").filter(
        has=page.get_by_role("heading", name=metric, exact=True))
    card.wait_for(timeout=PAGE_S * 1000)
    plot = card.locator(".js-plotly-plot")
    plot.wait_for(timeout=PAGE_S * 1000)
    traces = plot.evaluate("gd => gd.data.map(t => ({name: t.name, x: Array.from(t.x), y: Array.from(t.y)}))")
    # MLflow draws each run twice (line and hover markers) with the same points
    return {t["name"]: (t["x"], t["y"]) for t in traces}


def test_the_readme_comparison_shows_sabo_and_ingo_error_curves_in_mlflow_ui(tmp_path, monkeypatch, capsys):
    browser_path = chromium()
    if browser_path is None:
        pytest.skip("chromium is not installed (no `chromium` on PATH and no $SABO_BENCH_CHROMIUM): "
                    "`apt-get install chromium` on Debian")
    from replication.cli import main

    monkeypatch.chdir(tmp_path)
    shutil.copyfile(ROOT / "params.yaml", tmp_path / "params.yaml")
    db = tmp_path / "mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{db}")
    selection = ["--profile", "ci", "--setting", SETTING, "--function", FUNCTION]
    assert main(["run", "synthetic", *selection, "--method", *METHODS, "--workers", "2", "--quiet"]) == 0
    assert "4 runs finished (0 diverged)" in capsys.readouterr().out

    port = free_port()
    ui = f"http://127.0.0.1:{port}"
    log = tmp_path / "mlflow-ui.log"
    with mlflow_ui(db, port, log) as server:
        # docs/mlflow.md step 2, for this profile, setting and function
        command, _ = readme_comparison()
        words = shlex.split(command)
        for option, value in (("--profile", "ci"), ("--setting", SETTING), ("--function", FUNCTION)):
            words[words.index(option) + 1] = value
        assert main([*words[1:], "--ui", ui]) == 0
        out = capsys.readouterr().out
        assert "0 records logged" in out and "4 already there" in out
        [url] = re.findall(r"compare the methods .*: (http\S+)", out)
        state = urllib.parse.parse_qs(url.split("?", 1)[1])
        assert state["searchFilter"] == [readme_filter("ci", SETTING, FUNCTION)]

        client = mlflow.tracking.MlflowClient(f"sqlite:///{db}")
        exp = client.get_experiment_by_name("synthetic")
        groups = {g.data.tags["sabo_bench_method"]: g for g in client.search_runs([exp.experiment_id],
                                                                                state["searchFilter"][0])}
        assert sorted(groups) == sorted(METHODS)
        names = {m: f"{SETTING}/{FUNCTION}/{m} [ci]" for m in METHODS}
        assert {m: g.info.run_name for m, g in groups.items()} == names

        wait_until_serving(server, port, log)
        artifacts = Path(os.environ.get("SABO_BENCH_ARTIFACTS") or tmp_path)
        artifacts.mkdir(parents=True, exist_ok=True)
        shot = artifacts / "mlflow_comparison.png"
        with sync_api.sync_playwright() as pw:
            # as root (CI containers) Chromium refuses to start inside its sandbox
            browser = pw.chromium.launch(executable_path=browser_path,
                                         args=["--no-sandbox", "--disable-dev-shm-usage"])
            try:
                page = browser.new_page(viewport={"width": 1600, "height": 1000})
                page.goto(url, timeout=PAGE_S * 1000)  # docs/mlflow.md step 3
                # the group runs themselves are the rows (not a collapsed parent)
                for name in names.values():
                    page.get_by_role("link", name=name, exact=True).first.wait_for(timeout=PAGE_S * 1000)
                curves = plotted_curves(page, "error_median")
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
        history = client.get_metric_history(group.info.run_id, "error_median")
        x, y = curves[names[method]]
        assert x == [h.step for h in history] and y == pytest.approx([h.value for h in history])
        # against evaluations: the last point is the budget of T = 1000 iterations in evaluations
        per_iteration = 2 * 100 if method == "sabo" else 100
        assert x[0] == 0 and x[-1] == 1000 * per_iteration
        assert y[-1] < y[0]  # both methods make progress on the ellipsoid
    assert shot.stat().st_size > 10_000
