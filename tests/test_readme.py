"""Every Python block of README.md and of the documentation's pages (docs/) runs as written, and the
result the README and "Using SABO" describe is what ``sabo`` returns.

A page's blocks run in order in one namespace of their own (a later block may use an earlier block's
names; pages do not share names), with the optimizer registries restored afterwards, so an optimizer
a block registers stays in its test. Shell and plain blocks are not run here (CI runs the two
commands between the README's markers). ``docs/results`` is a link to ``results/``, whose pages the
pipeline writes: they hold no code to run, and are left out.
"""
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.optimize

import sabo
import sabo.protocol

ROOT = Path(__file__).resolve().parents[1]
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
PAGES = ["README.md"] + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md")
                               if p.relative_to(ROOT / "docs").parts[0] != "results")


def python_blocks(page: str) -> list[tuple[int, str]]:
    """(line number, code) of each fenced ```python block of ``page`` (relative to the root)."""
    text = (ROOT / page).read_text()
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in PYTHON_BLOCK.finditer(text)]


def run_page(page: str) -> dict:
    """Every Python block of ``page``, in order, in one namespace; the namespace."""
    namespace: dict = {}
    for line, code in python_blocks(page):
        # padded so a traceback names the page's own line numbers
        exec(compile("\n" * (line - 1) + code, page, "exec"), namespace)
    return namespace


def test_the_pages_with_code_are_found():
    assert "docs/sabo/index.md" in PAGES and "docs/extending/optimizer.md" in PAGES
    assert len(python_blocks("README.md")) >= 1 and len(python_blocks("docs/sabo/index.md")) >= 1


@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p)])
def test_every_python_block_of_the_page_runs(page, registries, capsys):
    namespace = run_page(page)
    if page in ("README.md", "docs/sabo/index.md"):
        assert isinstance(namespace["res"], sabo.OptimizeResult)


def test_the_result_reads_like_scipys():
    res = sabo.minimize(lambda x: np.sum(x**2), np.ones(4), popsize=6, seed=0, max_iter=20)
    assert res["x"] is res.x and res["fun"] == res.fun and isinstance(res, dict)
    assert {"x", "fun", "x_best", "fun_best", "nit", "nfev", "success", "status", "message", "history",
            "stats"} <= set(res.keys())
    assert res.success is False and res.status == 2 and res.message == "maximum number of iterations reached"
    assert isinstance(res, scipy.optimize.OptimizeResult)
    assert res.fun_best == pytest.approx(np.sum(res.x_best**2)) and res.fun == pytest.approx(np.sum(res.x**2))
    assert "success=False" in repr(res) and "history=<20 records>" in repr(res)
    with pytest.raises(AttributeError):
        getattr(res, "no_such_field")  # noqa: B009 (the attribute access is the test)
    res.extra = 1  # attribute and item are the same thing, as in scipy
    assert res["extra"] == 1


def test_using_sabo_documents_every_field_of_the_result():
    text = (ROOT / "docs" / "sabo" / "index.md").read_text()
    section = text[:text.index("## scipy's conventions")]
    res = sabo.minimize(lambda x: np.sum(x**2), np.ones(4), popsize=6, seed=0, max_iter=2)
    for key in ("x", "fun", "x_best", "fun_best", "success", "message", "history"):
        assert f"res.{key}" in section and key in res, key
