"""The modules of each study package import one another without a circle.

A study's ``runs.py`` (its run configs, the name of its report) is read by ``report.py`` and
``study.py``; ``study.py`` (the :class:`replication.studies.Study` module) calls ``report.py``. An
import inside a function counts as much as one at the top: a circle hidden in a function still
makes each module need the other. The graph is read from the source (``ast``), so the test needs
none of the studies' optional packages.
"""
import ast
import importlib
from pathlib import Path

import pytest

from replication.studies import STUDIES, get_study

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted({module.rsplit(".", 1)[0] for module in STUDIES.values()})


def imported_modules(package: str, source: str) -> set[str]:
    """The modules of ``package`` that the module with this ``source`` imports anywhere in its body."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level <= 1:
            base = node.module if node.level == 0 else ".".join(filter(None, (package, node.module)))
            found |= {f"{package}.{a.name}" for a in node.names} if base == package else {base}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return {m for m in found if m.startswith(package + ".")}


def import_graph(package: str) -> dict[str, set[str]]:
    directory = ROOT / package.replace(".", "/")
    return {f"{package}.{p.stem}": imported_modules(package, p.read_text()) for p in sorted(directory.glob("*.py"))
            if p.stem != "__init__"}


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """The modules ``start`` imports, directly or through other modules of the graph."""
    seen, todo = set(), list(graph.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def test_the_graph_reader_sees_a_circle_made_inside_a_function():
    graph = {"p.study": {"p.runs", "p.report"}, "p.report": {"p.runs", "p.figures"}, "p.runs": set(),
             "p.figures": set()}
    assert "p.study" not in reachable(graph, "p.study") and reachable(graph, "p.report") == {"p.runs", "p.figures"}
    graph["p.figures"].add("p.study")  # report -> figures -> study -> report: a circle through a third module
    assert "p.report" in reachable(graph, "p.report") and "p.study" in reachable(graph, "p.study")
    assert imported_modules("p", "def f():\n    from .study import configs\n") == {"p.study"}
    assert imported_modules("p", "from . import report\nimport p.runs\nimport numpy\nfrom .. import x\n") == {
        "p.report", "p.runs"}


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circle_through_a_studys_runs_report_or_study_module(package):
    graph = import_graph(package)
    study, report, runs = (f"{package}.{name}" for name in ("study", "report", "runs"))
    assert {study, report, runs} <= set(graph), package
    for module in (study, report, runs):
        assert module not in reachable(graph, module), f"{module} imports itself through {sorted(graph[module])}"
    assert study not in reachable(graph, report) | reachable(graph, runs)  # the layers: runs <- report <- study
    assert report not in reachable(graph, runs)
@pytest.mark.parametrize("name", sorted(STUDIES))
def test_the_study_module_still_names_its_runs_and_report(name):
    """The Study contract is unchanged: ``configs`` and ``REPORT_NAME`` are the study module's, from runs.py."""
    if name == "bbob":
        pytest.importorskip("cocoex")
    study = get_study(name)
    runs = importlib.import_module(f"replication.{name}.runs")
    assert study.configs is runs.configs and study.REPORT_NAME == runs.REPORT_NAME
