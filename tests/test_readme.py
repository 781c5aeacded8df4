"""Every Python block of README.md runs as written, and the result it describes is what ``sabo`` returns.

The blocks run in order in one namespace (a later block may use an earlier block's names), with
the optimizer registries restored afterwards, so an optimizer a block registers stays in this
test. Shell and plain blocks are not run here (CI runs the two commands between the README's
markers).
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


def python_blocks() -> list[tuple[int, str]]:
    """(line number, code) of each fenced ```python block of README.md."""
    text = (ROOT / "README.md").read_text()
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in PYTHON_BLOCK.finditer(text)]


def test_the_readme_has_python_blocks():
    assert len(python_blocks()) >= 2


def test_every_python_block_of_the_readme_runs(registries, capsys):
    namespace: dict = {}
    for line, code in python_blocks():
        # padded so a traceback names the README's own line numbers
        exec(compile("\n" * (line - 1) + code, "README.md", "exec"), namespace)
    res = namespace["res"]
    assert isinstance(res, sabo.OptimizeResult)


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


def test_the_readme_documents_every_field_of_the_result():
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Using SABO"):text.index("### Options")]
    res = sabo.minimize(lambda x: np.sum(x**2), np.ones(4), popsize=6, seed=0, max_iter=2)
    for key in ("x", "fun", "x_best", "fun_best", "success", "message", "history"):
        assert f"res.{key}" in section and key in res, key
