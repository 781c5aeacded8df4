"""Optimizers from other packages (baselines/plugins.py; docs/extending/optimizer.md).

Nothing is installed. A package is written into a temporary directory put on ``sys.path``,
with a ``<dist>.dist-info`` folder holding its ``entry_points.txt``: what ``pip install``
writes and what ``importlib.metadata`` reads, so the entry-point route runs for real. The
documentation's class and entry point are the package of the main test, which runs the method on the
``ci`` profiles of the synthetic and image studies through the command line. Registries,
imported modules and ``sys.path`` are restored after each test.
"""
import json
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import checkpoint_of, small_config

import baselines
import sabo
import sabo.protocol
from baselines.plugins import PluginError
from replication import executors
from replication.cli import main
from replication.engine import execute, kept_path, record_path
from replication.errors import UsageError
from replication.params import validate_params
from replication.storage import quarantined_files, read_state, write_state

ROOT = Path(__file__).resolve().parents[1]
GROUP = "sabo_bench.optimizers"


def readme_blocks() -> dict[str, str]:
    """The code blocks of the documentation's "Adding your own optimizer from another package", by language."""
    text = (ROOT / "docs" / "extending" / "optimizer.md").read_text()
    section = text[text.index("## Adding your own optimizer from another package"):
                   text.index("## Adding an optimizer to this repository")]
    return {lang: code for lang, code in re.findall(r"```(\w+)\n(.*?)```", section, re.S)}


@pytest.fixture
def isolated(registries, monkeypatch, tmp_path, umap_cache):
    """A temporary directory on sys.path; registries, imported modules and the plugin record restored after."""
    monkeypatch.setattr(baselines, "_IMPORTED", {})
    monkeypatch.setenv("SABO_BENCH_UMAP_CACHE", str(umap_cache))
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    before = set(sys.modules)
    yield site
    for name in set(sys.modules) - before:
        if str(getattr(sys.modules[name], "__file__", None) or "").startswith(str(site)):
            del sys.modules[name]


def write_package(site: Path, modules: dict[str, str], entry_points: dict[str, str] | None = None,
                  dist: str = "my-package") -> None:
    """Modules ``{"pkg.mod": source}`` under ``site``; with ``entry_points``, a dist-info declaring them."""
    for module, source in modules.items():
        path = site.joinpath(*module.split("."))
        for parent in [site.joinpath(*module.split(".")[:i]) for i in range(1, module.count(".") + 1)]:
            parent.mkdir(exist_ok=True)
            (parent / "__init__.py").touch()
        path.with_suffix(".py").write_text(source)
    if entry_points is not None:
        info = site / f"{dist.replace('-', '_')}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
        lines = "".join(f"{name} = {value}\n" for name, value in entry_points.items())
        (info / "entry_points.txt").write_text(f"[{GROUP}]\n{lines}")


def readme_package(site: Path) -> tuple[str, str]:
    """The documentation's class as ``my_package.search`` with its entry point; (entry point name, its value)."""
    blocks = readme_blocks()
    [(name, value)] = re.findall(r'^(\w+) = "([\w.:]+)"$', blocks["toml"], re.M)
    assert f'[project.entry-points."{GROUP}"]' in blocks["toml"]
    write_package(site, {value.partition(":")[0]: blocks["python"]}, {name: value})
    return name, value


def study_params(tmp_path, **extra) -> Path:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    for study in ("synthetic", "image"):
        params[study]["methods"]["local_search"] = {}
    params.update(extra)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return path


def records(runs: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(runs.rglob("*.json"))]


# ---------------------------------------------------------------------------- the documentation's route
def test_the_readme_section_is_under_25_lines():
    blocks = readme_blocks()
    assert set(blocks) == {"python", "toml", "yaml"}
    assert sum(len([line for line in code.splitlines() if line.strip()]) for code in blocks.values()) < 25


def test_the_readme_optimizer_passes_the_conformance_checks_at_popsize_1(isolated):
    """Its class declares min_popsize = 1 (a (1+1)-ES at popsize 1), display_name, color and its step sizes in
    _STATE_FIELDS: the registry-wide checks (popsize 1 built and driven, 0 refused, bit-identical save/restore of
    the steps) pass, and the (1+1)-ES adapts its step (from 1 to below 1e-5 on a sphere it solves)."""
    from test_protocol import CHECKS, drive

    write_package(isolated, {"my_package.search": readme_blocks()["python"]})
    cls = baselines.load_class("my_package.search:LocalSearch", ["my_package.search"])
    assert (cls.min_popsize, cls.display_name, cls.color) == (1, "Local search", "#882255")
    for check in CHECKS:
        check("local_search")
    one = baselines.make("local_search", x0=np.full(5, 3.0), popsize=1, seed=0)
    res = sabo.run(one, lambda X: np.sum(X**2, axis=1), max_iter=1500)
    assert res.fun < 1e-12 and res.nfev == 1501 and np.all(one.state_dict()["state"]["step"] < 1e-5)  # from 1
    vector = drive(baselines.make("local_search", x0=np.full(5, 3.0), sigma0=[1.0, 1.0, 1.0, 1.0, 0.1], seed=0), 20)
    step = vector.state_dict()["state"]["step"]
    assert step.shape == (5,) and step[4] / step[0] == pytest.approx(0.1)  # per coordinate, from the vector sigma0
    with pytest.raises(ValueError, match=r"popsize must be an integer in \[2, 1000000\]"):
        baselines.make("ingo", x0=np.ones(3), popsize=1)  # the built-in methods compare candidates


def test_the_readme_optimizer_runs_on_the_ci_profiles_of_two_studies(isolated, tmp_path, capsys):
    """Installed as an entry point only: found by its name the first time params.yaml's methods are checked."""
    name, value = readme_package(isolated)
    assert name == "local_search" and name not in baselines.REGISTRY
    params = study_params(tmp_path)
    runs = tmp_path / "runs"
    common = ["--params", str(params), "--profile", "ci", "--runs-dir", str(runs), "--method", name, "--no-track",
              "--quiet"]
    # the synthetic ci profile selected down to one run (d = 200, N = 100, 1000 iterations)
    assert main(["run", "synthetic", *common, "--setting", "d200_N100", "--function", "ellipsoid", "--seed", "0"]) == 0
    assert baselines.REGISTRY[name].__module__ == "my_package.search"  # loaded from the entry point
    # the image ci profile's runs of the method: d = 100, noise 0% and 60%, 30 iterations of N = 100
    assert main(["run", "image", *common]) == 0
    done = records(runs)
    assert sorted((r["config"]["study"], r["config"]["setting"]) for r in done) == [
        ("image", "d100"), ("image", "d100"), ("synthetic", "d200_N100")]
    for r in done:
        result = r["result"]
        assert r["config"]["method"] == name and result["status"] == "completed"
        assert result["evals_per_iteration"] == 100 and result["curve"]["nfev"][-1] == 100 * r["config"]["budget"][
            "max_iter"]
        assert "my_package" not in json.dumps(r["config"])  # configs and records hold the registry name only
    synthetic = next(r for r in done if r["config"]["study"] == "synthetic")["result"]["final"]
    assert synthetic["f_mean"] == synthetic["f_best"]  # the plugin's code ran: its mean is its best sample
    image = [r["result"]["final"] for r in done if r["config"]["study"] == "image"]
    assert all(0.0 <= f["test_accuracy"] <= 1.0 for f in image)


def test_a_misspelled_method_lists_the_installed_plugins_too(isolated, tmp_path, capsys):
    name, _ = readme_package(isolated)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["synthetic"]["methods"]["local_serch"] = {}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    assert main(["list", "synthetic", "--params", str(path), "--runs-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'local_serch' is not a registered optimizer (" in err, err
    assert f", {name});" in err and name not in baselines.REGISTRY, err  # listed, not loaded


def test_the_plugins_section_imports_only_what_it_allows(isolated, tmp_path, capsys):
    """The documentation's `plugins:` block, nothing installed; two workers load the class too."""
    blocks = readme_blocks()
    write_package(isolated, {"my_package.search": blocks["python"]})
    plugins = yaml.safe_load(blocks["yaml"])["plugins"]
    params = study_params(tmp_path, plugins=plugins)
    runs = tmp_path / "runs"
    with open(params) as fh:
        text = yaml.safe_load(fh)
    text["synthetic"]["profiles"]["ci"]["iterations"]["d200_N100"] = 60  # a small iteration override
    params.write_text(yaml.safe_dump(text))
    assert main(["run", "synthetic", "--params", str(params), "--profile", "ci", "--runs-dir", str(runs),
                 "--method", "local_search", "--setting", "d200_N100", "--function", "ellipsoid", "--workers", "2",
                 "--no-track", "--quiet"]) == 0  # two seeds, one per spawned worker process
    assert baselines.imported_plugins() == ["my_package.search:LocalSearch"]
    done = records(runs)
    assert [r["config"]["seed"] for r in done if r["config"]["method"] == "local_search"] in ([0, 1], [1, 0])
    assert all(r["result"]["status"] == "completed" and "my_package" not in json.dumps(r) for r in done)

    capsys.readouterr()
    text["plugins"] = {"allow": [], "optimizers": ["my_package.search:LocalSearch"]}
    params.write_text(yaml.safe_dump(text))
    del sys.modules["my_package.search"]
    assert main(["list", "synthetic", "--params", str(params), "--runs-dir", str(runs)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {params}: plugins.optimizers[0] = 'my_package.search:LocalSearch': module 'my_package.search' is "
        "not in plugins.allow (empty); list it there to let it be imported"]
    assert "my_package.search" not in sys.modules


def test_plugins_section_refusals(isolated):
    write_package(isolated, {"toy_plugins.mod": (
        "from sabo.protocol import AskTellOptimizer\n"
        "VALUE = 3\n"
        "class Unnamed(AskTellOptimizer):\n"
        "    pass\n"), "toy_plugins.clash": (
        "from sabo.protocol import AskTellOptimizer\n"
        "class Clash(AskTellOptimizer):\n"
        "    name = 'sabo'\n")})
    refused_before_any_import = [
        ({"optimizers": ["toy_plugins.mod"], "allow": ["toy_plugins.mod"]},
         "plugins.optimizers[0] = 'toy_plugins.mod': must be 'package.module:Class'"),
        ({"optimizers": ["toy_plugins.mod:VALUE"]},
         "plugins.optimizers[0] = 'toy_plugins.mod:VALUE': module 'toy_plugins.mod' is not in plugins.allow (empty)"),
        ({"optimizers": ["toy_plugins.mod:VALUE"], "allow": ["toy_plugins"]},  # a package does not allow its modules
         "module 'toy_plugins.mod' is not in plugins.allow (toy_plugins)"),
        ({"allow": ["toy_plugins..mod"]}, "plugins.allow[0] = 'toy_plugins..mod': must be a module path"),
        ({"allowed": ["toy_plugins.mod"]}, "plugins.allowed = ['toy_plugins.mod']: unknown key (allowed here: allow, "
                                           "optimizers)"),
    ]
    refused_after_import = [
        ({"optimizers": ["no_such_package.mod:X"], "allow": ["no_such_package.mod"]},
         "'no_such_package.mod:X': module 'no_such_package.mod' cannot be imported: ModuleNotFoundError: No module "
         "named 'no_such_package'"),
        ({"optimizers": ["toy_plugins.mod:Missing"], "allow": ["toy_plugins.mod"]},
         "module 'toy_plugins.mod' has no attribute 'Missing'"),
        ({"optimizers": ["toy_plugins.mod:VALUE"], "allow": ["toy_plugins.mod"]},
         "'toy_plugins.mod:VALUE' is 3, not a subclass of sabo.protocol.AskTellOptimizer"),
        ({"optimizers": ["toy_plugins.mod:Unnamed"], "allow": ["toy_plugins.mod"]},
         "Unnamed declares no registry name"),
        ({"optimizers": ["toy_plugins.clash:Clash"], "allow": ["toy_plugins.clash"]},
         "module 'toy_plugins.clash' cannot be imported: ValueError: optimizer name 'sabo' of "
         "toy_plugins.clash.Clash is already registered for sabo.sabo.SABO"),
    ]
    for i, (plugins, message) in enumerate(refused_before_any_import + refused_after_import):
        with pytest.raises(UsageError) as refused:
            validate_params({"plugins": plugins})
        assert message in str(refused.value) and "\n" not in str(refused.value), str(refused.value)
        for spec in plugins.get("optimizers", []):  # named once (it was repeated: "= 'x': 'x': module ...")
            assert str(refused.value).count(repr(spec)) <= 1, str(refused.value)
        if i < len(refused_before_any_import):
            assert "toy_plugins.mod" not in sys.modules


# ---------------------------------------------------------------------------- entry points
BROKEN = {
    "toy_good": "toy_broken.good:Good",
    "missing_module": "toy_broken.missing:Cls",
    "not_a_class": "toy_broken.good:VALUE",
    "misnamed": "toy_broken.good:Good2",
}
GOOD = """
from sabo.protocol import AskTellOptimizer

VALUE = 1


class Good(AskTellOptimizer):
    name = "toy_good"

    def __init__(self, x0, sigma0=1.0, popsize=4, seed=None, *, nonfinite="raise"):
        super().__init__(x0, sigma0=sigma0, popsize=popsize, seed=seed, nonfinite=nonfinite)


class Good2(Good):
    name = "other_name"
"""


def test_a_broken_entry_point_gives_one_line_naming_it(isolated):
    write_package(isolated, {"toy_broken.good": GOOD}, BROKEN, dist="toy-broken")
    where = "(group sabo_bench.optimizers, distribution toy-broken 0.1)"
    with pytest.raises(PluginError) as broken:
        baselines.find("missing_module")
    assert str(broken.value) == (f"entry point 'missing_module' = 'toy_broken.missing:Cls' {where} cannot be loaded: "
                                 "ModuleNotFoundError: No module named 'toy_broken.missing'")
    assert baselines.find("no_such_plugin") is None
    with pytest.raises(ValueError, match=r"unknown optimizer 'no_such_plugin'; .*nevergrad\[:<algorithm>\].*installed "
                                         r"plugins, loaded on first use: misnamed, missing_module, not_a_class, "
                                         r"toy_good"):
        baselines.make("no_such_plugin", x0=np.ones(2))
    with pytest.raises(PluginError) as problems:
        baselines.load_plugins()
    assert str(problems.value).splitlines() == [
        f"entry point 'missing_module' = 'toy_broken.missing:Cls' {where} cannot be loaded: ModuleNotFoundError: No "
        "module named 'toy_broken.missing'",
        f"entry point 'not_a_class' = 'toy_broken.good:VALUE' {where} is 1, not a subclass of "
        "sabo.protocol.AskTellOptimizer",
        f"entry point 'misnamed' = 'toy_broken.good:Good2' {where}: the entry point's name must be the class's "
        "registry name 'other_name'"]
    assert baselines.REGISTRY["toy_good"].__module__ == "toy_broken.good"  # the good one is loaded all the same

    params = {"synthetic": {**small_params(), "methods": {"not_a_class": {}}}}
    with pytest.raises(UsageError) as refused:
        validate_params(params)
    assert str(refused.value) == (f"params.yaml: synthetic.methods: key 'not_a_class' cannot be used: entry point "
                                  f"'not_a_class' = 'toy_broken.good:VALUE' {where} is 1, not a subclass of "
                                  "sabo.protocol.AskTellOptimizer")


def test_two_distributions_declaring_one_name_are_refused(isolated):
    write_package(isolated, {"toy_a.mod": GOOD}, {"toy_good": "toy_a.mod:Good"}, dist="toy-a")
    write_package(isolated, {"toy_b.mod": GOOD}, {"toy_good": "toy_b.mod:Good"}, dist="toy-b")
    with pytest.raises(PluginError, match="optimizer plugin 'toy_good' is declared by several entry points: "
                                          "entry point 'toy_good' = 'toy_.\\.mod:Good'"):
        baselines.find("toy_good")
    assert "toy_a.mod" not in sys.modules and "toy_b.mod" not in sys.modules


def small_params() -> dict:
    return {"profile": "tiny", "profiles": {"tiny": {"seeds": [0], "iterations": {"d4_N4": 5}}},
            "settings": {"d4_N4": {"dim": 4, "popsize": 4}}, "functions": ["ellipsoid"],
            "mu0": {"low": 0.0, "high": 1.0}, "sigma0": 1.0}


# ---------------------------------------------------------------------------- saved files import nothing
def test_no_saved_state_or_checkpoint_can_make_a_module_be_imported(isolated, tmp_path):
    name, value = readme_package(isolated)  # installed, not loaded
    module = value.partition(":")[0]
    state = baselines.make("ingo", x0=np.ones(3), seed=0).state_dict()
    for named in (name, value, module):
        with pytest.raises(ValueError, match=f"state\\['optimizer'\\] names an unknown optimizer '{named}'"):
            sabo.protocol.AskTellOptimizer.from_state_dict({**state, "optimizer": named})
    assert module not in sys.modules and name not in baselines.REGISTRY

    cfg = small_config("sabo", dim=6, popsize=4, T=30)
    ckpt = checkpoint_of(cfg, tmp_path / "runs", iters=10)
    for named in (name, value):  # a checkpoint whose saved optimizer names the plugin
        saved = read_state(ckpt)
        saved["optimizer"]["optimizer"] = named
        write_state(ckpt, saved)
        record = execute(cfg, tmp_path / "runs")
        assert record["provenance"]["resumed"] == 0 and record["result"]["status"] == "completed"
        assert module not in sys.modules and name not in baselines.REGISTRY
        record_path(tmp_path / "runs", cfg).unlink()
        kept_path(tmp_path / "runs", cfg).unlink()  # not put back from runs/.kept: the run must start afresh
        ckpt = checkpoint_of(cfg, tmp_path / "runs", iters=10)
    assert len(quarantined_files(tmp_path / "runs")) == 2


def test_ray_workers_load_the_allowed_module_class_plugins(isolated, tmp_path):
    """`plugins.optimizers` under the Ray executor: each Ray worker imports the allowed module too."""
    pytest.importorskip("ray")
    blocks = readme_blocks()
    write_package(isolated, {"my_package.search": blocks["python"]})
    params = study_params(tmp_path, plugins=yaml.safe_load(blocks["yaml"])["plugins"])
    text = yaml.safe_load(params.read_text())
    text["synthetic"]["profiles"]["ci"]["iterations"]["d200_N100"] = 60
    params.write_text(yaml.safe_dump(text))
    runs = tmp_path / "runs"
    assert main(["run", "synthetic", "--params", str(params), "--profile", "ci", "--runs-dir", str(runs),
                 "--method", "local_search", "--setting", "d200_N100", "--function", "ellipsoid", "--workers", "2",
                 "--executor", "ray", "--no-track", "--quiet"]) == 0
    done = records(runs)
    assert sorted(r["config"]["seed"] for r in done) == [0, 1]
    assert all(r["result"]["status"] == "completed" and "my_package" not in json.dumps(r) for r in done)
    assert executors.plugin_pythonpath(["my_package.search:LocalSearch"]).split(os.pathsep)[0] == str(isolated)


def test_a_ray_worker_that_cannot_import_a_plugin_stops_the_study_with_one_line(isolated, tmp_path, monkeypatch,
                                                                                capsys):
    pytest.importorskip("ray")
    blocks = readme_blocks()
    write_package(isolated, {"my_package.search": blocks["python"]})
    params = study_params(tmp_path, plugins=yaml.safe_load(blocks["yaml"])["plugins"])
    monkeypatch.setattr(executors, "plugin_pythonpath", lambda plugins: "")  # as on a node without the module
    capsys.readouterr()
    assert main(["run", "synthetic", "--params", str(params), "--profile", "ci", "--runs-dir", str(tmp_path / "runs"),
                 "--method", "local_search", "--setting", "d200_N100", "--function", "ellipsoid", "--seed", "0",
                 "--executor", "ray", "--no-track", "--quiet"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: a Ray worker cannot load an optimizer plugin: 'my_package.search:LocalSearch': module "
        "'my_package.search' cannot be imported: ModuleNotFoundError: No module named 'my_package'; the module must "
        "be importable on every node (installed there, or on their PYTHONPATH)"]


def test_the_conformance_checks_reach_an_installed_plugin(tmp_path):
    """tests/test_protocol.py checks every registered name, an installed plugin's included (its entry points are
    loaded before the tests are collected); it collected none of them (they load only when first named)."""
    import subprocess

    site = tmp_path / "site"
    site.mkdir()
    name, _ = readme_package(site)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          str(ROOT / "tests" / "test_protocol.py"), "-k", name], capture_output=True, text=True,
                         env=env, cwd=ROOT)
    collected = [line for line in out.stdout.splitlines() if "::" in line]
    assert out.returncode == 0 and len(collected) >= 10, out.stdout + out.stderr
    assert all(f"-{name}]" in line or f"[{name}" in line for line in collected), collected
