"""What DVC shows of the committed results: `dvc plots show` works offline (the reports' own figures as image
plots, checked in a headless Chromium with the network cut), and no file advises `dvc exp run -S`, which deletes
records (docs/studies/dvc.md).

Chromium: ``$SABO_BENCH_CHROMIUM``, else ``chromium`` or ``chromium-browser`` on PATH (Debian: ``apt-get install
chromium``), driven through Playwright (the dev extra); the browser test is skipped without them (and so fails CI,
tests/conftest.py). The page's screenshot is kept under ``$SABO_BENCH_ARTIFACTS`` where that is set."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import chromium

ROOT = Path(__file__).resolve().parents[1]


def plots() -> list[str]:
    return yaml.safe_load((ROOT / "dvc.yaml").read_text())["plots"]


def declared_outs() -> set[str]:
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    return {next(iter(out)) for stage in stages.values() for out in stage.get("outs", ()) if isinstance(out, dict)}


def test_the_plots_are_figures_the_report_stages_write():
    """Image plots only: a data plot (a dict with a template) would make DVC's page load vega from a CDN."""
    shown = plots()
    assert shown and all(isinstance(p, str) and p.endswith(".png") for p in shown), shown
    assert set(shown) <= declared_outs()
    assert all((ROOT / p).is_file() for p in shown)  # committed with the reports


def advice_to_run_experiments(text: str) -> list[str]:
    """The sentences of ``text`` that name `dvc exp run -S` without warning against it (no "not", no "delete")."""
    sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z`*(])", " ".join(text.split()))
    return [s for s in sentences if "dvc exp run -S" in s and not re.search(r"\bnot\b|\bdelet", s, re.I)]


def test_no_file_advises_dvc_exp_run_with_set_params():
    """`dvc exp run -S` deletes the records dvc.lock does not list: where a file names it, it warns against it."""
    places = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), ROOT / "params.yaml", ROOT / "dvc.yaml",
              *(ROOT / "results").rglob("*.md"), *(ROOT / "replication").rglob("*.py")]
    advice = [f"{path.relative_to(ROOT)}: {sentence}" for path in places
              for sentence in advice_to_run_experiments(path.read_text(encoding="utf-8"))]
    assert not advice, advice
    # the sentence the prompt report had, which advised it
    assert advice_to_run_experiments("On a GPU machine with access to the Hugging Face hub (or a filled `HF_HOME`): "
                                     "`dvc exp run -S prompt.profile=gpu prompt_report`, or `sabo-bench prepare "
                                     "prompt --profile gpu`.")


def test_dvc_plots_show_renders_offline(tmp_path):
    pytest.importorskip("dvc")
    sync_api = pytest.importorskip("playwright.sync_api")
    browser_path = chromium()
    if browser_path is None:
        pytest.skip("chromium is not installed (no `chromium` on PATH and no $SABO_BENCH_CHROMIUM): "
                    "`apt-get install chromium` on Debian")
    repo = tmp_path / "repo"  # a DVC repository (no git) with the pipeline and the committed figures
    repo.mkdir()
    for name in ("dvc.yaml", "params.yaml"):
        shutil.copy(ROOT / name, repo)
    for path in plots():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / path, repo / path)
    subprocess.run([sys.executable, "-m", "dvc", "init", "--no-scm", "-q"], cwd=repo, check=True)
    out = tmp_path / "shown"
    subprocess.run([sys.executable, "-m", "dvc", "plots", "show", "-o", str(out)], cwd=repo, check=True,
                   capture_output=True)
    html = (out / "index.html").read_text()
    assert "<script" not in html and "http" not in html  # nothing to fetch
    artifacts = Path(os.environ.get("SABO_BENCH_ARTIFACTS") or tmp_path)
    artifacts.mkdir(parents=True, exist_ok=True)
    fetched = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=browser_path, args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            context = browser.new_context(offline=True, viewport={"width": 1600, "height": 1000})

            def route(request_route):
                fetched.append(request_route.request.url)
                if request_route.request.url.startswith("file://"):
                    request_route.continue_()
                else:
                    request_route.abort()
            context.route("**/*", route)
            page = context.new_page()
            page.goto((out / "index.html").as_uri())
            page.wait_for_load_state("load")
            sizes = page.eval_on_selector_all("img", "imgs => imgs.map(i => [i.getAttribute('src'), i.naturalWidth])")
            page.screenshot(path=str(artifacts / "dvc_plots.png"), full_page=False)
        finally:
            browser.close()
    assert len(sizes) == len(plots())
    assert all(width > 100 for _, width in sizes), sizes  # every figure drawn, none a broken image
    assert all(url.startswith("file://") for url in fetched), fetched
