"""The package as it ships: every file the code reads at run time is in the wheel, and the command
line without the replication extra is one line.

The wheel itself is built, checked (``twine check``) and installed in a fresh environment by
``.ci/run``; here, what can go wrong between the source tree and ``pyproject.toml``: a data file
added next to the code but not declared as package data is missing from every installed copy
while every test of an editable checkout still passes.
"""
import fnmatch
import os
import subprocess
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("sabo", "baselines", "replication")


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def data_files() -> list[str]:
    """The files of the packages' source tree that are not Python code (as git knows them)."""
    listed = subprocess.run(["git", "ls-files", *PACKAGES], cwd=ROOT, capture_output=True, text=True, check=True)
    return [f for f in listed.stdout.split() if not f.endswith(".py")]


def declared(path: str, package_data: dict[str, list[str]]) -> bool:
    """Whether ``path`` (relative to the root) matches a pattern of its package in ``package-data``."""
    parts = Path(path).parts
    for depth in range(len(parts) - 1, 0, -1):  # the innermost package first, as setuptools reads them
        package, inside = ".".join(parts[:depth]), "/".join(parts[depth:])
        if any(fnmatch.fnmatch(inside, pattern) for pattern in package_data.get(package, ())):
            return True
    return False


def test_every_data_file_of_the_packages_is_declared_package_data():
    package_data = pyproject()["tool"]["setuptools"]["package-data"]
    files = data_files()
    assert "replication/synthetic/claims.yaml" in files and "replication/image/paper_table3.yaml" in files
    missing = [f for f in files if not declared(f, package_data)]
    assert not missing, f"not in [tool.setuptools.package-data] of pyproject.toml, so not in the wheel: {missing}"


def test_the_declaration_check_catches_an_undeclared_file():
    package_data = {"replication.image": ["claims.yaml", "embeddings/*.npz"]}
    assert declared("replication/image/embeddings/a.npz", package_data)
    assert declared("replication/image/claims.yaml", package_data)
    assert not declared("replication/image/paper_table3.yaml", package_data)
    assert not declared("replication/synthetic/claims.yaml", package_data)


def test_the_library_depends_on_numpy_scipy_and_pycma_only():
    """`pip install sabo-bench` must not pull the replication stack (CI lists what a fresh environment got)."""
    project = pyproject()["project"]
    names = {req.split(">")[0].split("=")[0].split("[")[0].strip() for req in project["dependencies"]}
    assert names == {"numpy", "scipy", "cma"}
    assert {"docs", "replication", "dev"} <= set(project["optional-dependencies"])
    assert any(req.startswith("sabo-bench[") and "docs" in req for req in project["optional-dependencies"]["dev"])


def test_metadata_is_complete():
    project = pyproject()["project"]
    assert project["license"] == "MIT" and (ROOT / "LICENSE").is_file() and project["license-files"] == ["LICENSE"]
    assert project["readme"] == "README.md" and project["requires-python"].startswith(">=3.")
    assert any(c.startswith("Programming Language :: Python :: 3.") for c in project["classifiers"])
    assert project["scripts"]["sabo-bench"] == "replication.program:main"


def sabo_bench(*args: str, blocked: str | None = None) -> subprocess.CompletedProcess:
    """The program's entry point in a fresh interpreter, with the module ``blocked`` made unimportable."""
    block = f"sys.modules[{blocked!r}] = None; " if blocked else ""
    code = f"import sys; {block}sys.argv = ['sabo-bench', *sys.argv[1:]]; from replication.program import main; " \
           "sys.exit(main())"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


def test_without_the_replication_extra_the_command_is_one_line():
    done = sabo_bench("--help", blocked="filelock")  # replication.engine's first import of the extra
    assert done.returncode == 2, done.stderr
    assert done.stderr == ("error: sabo-bench runs the studies, which need the replication extra (no module named "
                           "'filelock' here): pip install 'sabo-bench[replication]'\n")


def test_with_the_extra_the_entry_point_is_the_command_line():
    done = sabo_bench("--help")
    assert done.returncode == 0 and "usage: sabo-bench" in done.stdout and "report" in done.stdout, done.stderr


def test_a_missing_module_of_our_own_is_a_traceback_not_advice():
    done = sabo_bench("--help", blocked="replication.engine")
    assert done.returncode == 1 and "Traceback" in done.stderr and "replication extra" not in done.stderr
