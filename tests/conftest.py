"""Fixtures shared by several test modules, and CI's rule on skipped tests.

Under ``CI=true`` a test or test module skipped because a dependency is missing fails
instead: CI installs the README's test command in a fresh environment, and a skip there
means the ``dev`` extra does not declare something the suite needs.
"""
import os

import pytest

# Skip reasons that mean "a package is missing": pytest.importorskip's message, and ours.
MISSING_DEPENDENCY = ("could not import", "is not installed")


def _missing_dependency(report) -> str | None:
    if not report.skipped or not isinstance(report.longrepr, tuple):
        return None
    reason = str(report.longrepr[2])
    return reason if any(marker in reason for marker in MISSING_DEPENDENCY) else None


def _fail_in_ci(report) -> None:
    reason = _missing_dependency(report)
    if reason and os.environ.get("CI", "").lower() == "true":
        report.outcome = "failed"
        report.longrepr = f"skipped for a missing dependency under CI=true: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_in_ci(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_in_ci(outcome.get_result())


@pytest.fixture
def registries(monkeypatch):
    """Copies of both optimizer registries for the duration of a test (monkeypatch puts the originals back): what a
    test registers stays in the test."""
    import baselines
    import sabo.protocol

    monkeypatch.setattr(sabo.protocol, "OPTIMIZERS", dict(sabo.protocol.OPTIMIZERS))
    monkeypatch.setattr(baselines, "REGISTRY", dict(baselines.REGISTRY))


@pytest.fixture
def one_torch_thread():
    """Keep torch at one CPU thread for the test (the suite may share the machine with long jobs)."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="session")
def umap_cache(tmp_path_factory):
    """One UMAP cache directory for the session's image-study runs: the embedding of the digits stand-in is
    fitted once (about 30 s on a busy 2-core machine) instead of once per test; it is keyed by its inputs
    (replication.image.features), so tests with other inputs still get their own."""
    return tmp_path_factory.mktemp("umap")
