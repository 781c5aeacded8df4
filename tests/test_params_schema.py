"""params.yaml's schema, safe names and command-line argument checks: one line, exit status 2, no traceback."""
import copy
import math
from pathlib import Path

import pytest
import yaml
from helpers import tiny_params

from replication.cli import main
from replication.config import RunConfig
from replication.errors import UsageError
from replication.names import MAX_NAME_LENGTH, check_name, is_valid_name
from replication.params import validate_params

ROOT = Path(__file__).resolve().parents[1]
PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())

TINY = tiny_params()


def cli(argv):
    try:
        return main(argv)
    except SystemExit as exc:  # argparse
        return exc.code


def run_list(tmp_path, params, study="synthetic", *extra, text=None):
    path = tmp_path / "params.yaml"
    path.write_text(text if text is not None else yaml.safe_dump(params))
    return cli(["list", study, "--params", str(path), "--runs-dir", str(tmp_path / "runs"), "--summary", *extra])


def one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "Traceback" not in captured.out
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


def tiny(mutate):
    p = copy.deepcopy(TINY)
    mutate(p["synthetic"])
    return p


# -- the current file ------------------------------------------------------------------------------
def test_the_current_params_yaml_validates():
    models = validate_params(copy.deepcopy(PARAMS))
    assert set(models) == {"synthetic", "image", "prompt", "bbob"}
    assert models["image"].methods["sabo_small_rho"]["optimizer"] == "sabo"


@pytest.mark.parametrize("study", ["synthetic", "image", "prompt", "bbob"])
def test_the_current_params_yaml_passes_the_command_line(study, tmp_path, capsys):
    assert run_list(tmp_path, None, study, text=(ROOT / "params.yaml").read_text()) == 0
    assert capsys.readouterr().err == ""


def test_every_profile_of_the_current_file_validates():
    for study, section in PARAMS.items():
        for profile in section["profiles"]:
            validate_params({study: {**section, "profile": profile}})


# -- bad parameter files: one line naming the key, its value and what is allowed -------------------
BAD_SYNTHETIC = [
    ("negative iterations", lambda s: s["profiles"]["tiny"]["iterations"].update(d10_N6=-5),
     ["synthetic.profiles.tiny.iterations.d10_N6 = -5", "integer >= 1"]),
    ("fractional iterations", lambda s: s["profiles"]["tiny"]["iterations"].update(d10_N6=2.5),
     ["synthetic.profiles.tiny.iterations.d10_N6 = 2.5", "integer >= 1"]),
    ("boolean iterations", lambda s: s["profiles"]["tiny"]["iterations"].update(d10_N6=True),
     ["synthetic.profiles.tiny.iterations.d10_N6 = True", "integer >= 1"]),
    ("string iterations", lambda s: s["profiles"]["tiny"]["iterations"].update(d10_N6="30"),
     ["synthetic.profiles.tiny.iterations.d10_N6 = '30'", "integer >= 1"]),
    ("seeds as a string", lambda s: s["profiles"]["full"].update(seeds="01"),
     ["synthetic.profiles.full.seeds = '01': must be a list of integers >= 0"]),
    ("a boolean seed", lambda s: s["profiles"]["full"].update(seeds=[0, True]),
     ["synthetic.profiles.full.seeds = [0, True]", "list of integers >= 0"]),
    ("a negative seed", lambda s: s["profiles"]["full"].update(seeds=[-1]),
     ["synthetic.profiles.full.seeds = [-1]", "list of integers >= 0"]),
    ("mu0 low > high", lambda s: s.update(mu0={"low": 2.0, "high": 1.0}),
     ["synthetic.mu0.low = 2.0", "<= high"]),
    ("dim 0", lambda s: s["settings"]["d10_N6"].update(dim=0),
     ["synthetic.settings.d10_N6.dim = 0", "integer >= 1"]),
    ("popsize 1", lambda s: s["settings"]["d10_N6"].update(popsize=1),
     ["synthetic.settings.d10_N6.popsize = 1", "integer >= 2"]),
    ("sigma0 0", lambda s: s.update(sigma0=0), ["synthetic.sigma0 = 0", "finite number > 0"]),
    ("sigma0 negative", lambda s: s.update(sigma0=-1.0), ["synthetic.sigma0 = -1.0", "finite number > 0"]),
    ("sigma0 nan", lambda s: s.update(sigma0=math.nan), ["synthetic.sigma0 = nan", "finite number > 0"]),
    ("sigma0 a string", lambda s: s.update(sigma0="1.0"), ["synthetic.sigma0 = '1.0'", "finite number > 0"]),
    ("profile names a missing setting", lambda s: s["profiles"]["tiny"]["iterations"].update(d99_N6=30),
     ["synthetic.profiles.tiny.iterations.d99_N6 = 30", "'d99_N6'", "not under synthetic.settings"]),
    ("active profile missing", lambda s: s.update(profile="huge"),
     ["synthetic.profile = 'huge'", "one of the profiles (full, tiny)"]),
    ("no full profile", lambda s: s["profiles"].pop("full"), ["synthetic.profiles", "must include `full`"]),
    ("missing key", lambda s: s.pop("sigma0"), ["synthetic.sigma0: required key missing"]),
    ("unknown section key", lambda s: s.update(sigma=1.0), ["synthetic.sigma = 1.0", "unknown key", "sigma0"]),
    ("unknown profile key", lambda s: s["profiles"]["tiny"].update(seed=[0]),
     ["synthetic.profiles.tiny.seed = [0]", "unknown key", "seeds, iterations"]),
    ("unknown setting key", lambda s: s["settings"]["d10_N6"].update(pop=6),
     ["synthetic.settings.d10_N6.pop = 6", "unknown key"]),
    ("unknown mu0 key", lambda s: s["mu0"].update(hi=1.0), ["synthetic.mu0.hi = 1.0", "unknown key"]),
    ("unknown method", lambda s: s["methods"].update(sabbo={}),
     ["synthetic.methods: key 'sabbo'", "not a registered optimizer", "sabo, ingo"]),
    ("unknown optimizer parameter", lambda s: s["methods"]["sabo"].update(lrr=0.1),
     ["synthetic.methods.sabo: key 'lrr'", "not a parameter of sabo", "lr, rho"]),
    ("unknown optimizer label", lambda s: s["methods"].update(variant={"optimizer": "sab", "lr": 0.1}),
     ["synthetic.methods.variant.optimizer = 'sab'", "registered optimizer"]),
    ("a grid list where none is expanded", lambda s: s["methods"]["ingo"].update(lr=[0.1, 1.0]),
     ["synthetic.methods.ingo.lr = [0.1, 1.0]", "single value"]),
    ("a grid that is not a mapping", lambda s: s["methods"].update(ingo=[0.1]),
     ["synthetic.methods.ingo = [0.1]", "mapping of optimizer parameter"]),
    ("a section that is not a mapping", lambda s: s.update(settings=[1, 2]),
     ["synthetic.settings = [1, 2]", "must be a mapping"]),
    ("an unknown function", lambda s: s.update(functions=["levy", "sphere"]),
     ["synthetic.functions[1] = 'sphere'", "not a synthetic function", "ellipsoid"]),
    ("setting key escaping runs/", lambda s: s["settings"].update({"../x": {"dim": 2, "popsize": 4}}),
     ["synthetic.settings: key '../x' is not a valid name (letters, digits, '_', '-', '.'; not starting with '.')"]),
    ("method key with a separator", lambda s: s["methods"].update({"a/b": {"optimizer": "sabo"}}),
     ["synthetic.methods: key 'a/b' is not a valid name"]),
    ("hidden function name", lambda s: s.update(functions=[".hidden"]),
     ["synthetic.functions[0] = '.hidden'", "not a valid name"]),
    ("empty profile name", lambda s: s["profiles"].update({"": {"seeds": [0], "iterations": {}}}),
     ["synthetic.profiles: key ''", "not a valid name"]),
    ("over-long setting name", lambda s: s["settings"].update({"x" * 100: {"dim": 2, "popsize": 4}}),
     ["synthetic.settings: key 'xxx", f"longer than {MAX_NAME_LENGTH} characters"]),
    ("an integer key", lambda s: s["settings"].update({200: {"dim": 2, "popsize": 4}}),
     ["synthetic.settings: key 200 is not a valid name"]),
    ("an extra method nobody defined", lambda s: s["profiles"]["tiny"].update(extra_methods={"turbo": {"d10_N6": 5}}),
     ["synthetic.profiles.tiny.extra_methods.turbo = 'turbo'", "not defined under synthetic.extra_methods"]),
    ("an extra method at a setting the profile lacks",
     lambda s: (s.update(extra_methods={"ingo_rank": {"optimizer": "ingo", "shaping": "rank"}}),
                s["profiles"]["tiny"].update(extra_methods={"ingo_rank": {"d99_N6": 5}})),
     ["synthetic.profiles.tiny.extra_methods.ingo_rank.d99_N6 = 5", "'d99_N6', which is not a setting of profile"]),
    ("an extra method's budget of 0 iterations",
     lambda s: (s.update(extra_methods={"ingo_rank": {"optimizer": "ingo", "shaping": "rank"}}),
                s["profiles"]["tiny"].update(extra_methods={"ingo_rank": {"d10_N6": 0}})),
     ["synthetic.profiles.tiny.extra_methods.ingo_rank", "must be an integer >= 1"]),
    ("an extra method that is also a paper method", lambda s: s.update(extra_methods={"ingo": {"lr": 0.5}}),
     ["synthetic.extra_methods = ['ingo']", "already under synthetic.methods"]),
]


def test_extra_methods_run_only_in_the_profiles_and_settings_that_name_them():
    from replication.synthetic.study import configs

    def with_extra(p):
        p.update(extra_methods={"ingo_rank": {"optimizer": "ingo", "shaping": "rank"}})
        p["profiles"]["tiny"]["extra_methods"] = {"ingo_rank": dict(p["profiles"]["tiny"]["iterations"])}
    params = tiny(with_extra)
    validate_params(params, studies=["synthetic"])
    tiny_profile = params["synthetic"]["profiles"]["tiny"]
    setting = next(iter(tiny_profile["iterations"]))
    runs = [c for c in configs(params) if c.method == "ingo_rank"]
    assert runs and {c.setting for c in runs} == {setting} and all(c.params["shaping"] == "rank" for c in runs)
    params["synthetic"]["profile"] = "full"
    assert not [c for c in configs(params) if c.method == "ingo_rank"]
    # a budget of its own: T = 2 for the extra method, the setting's T for the others
    params["synthetic"]["profile"] = "tiny"
    tiny_profile["extra_methods"] = {"ingo_rank": {setting: 2}}
    validate_params(params, studies=["synthetic"])
    budgets = {(c.method, c.setting): c.budget["max_iter"] for c in configs(params) if c.setting == setting}
    assert budgets[("ingo_rank", setting)] == 2
    assert {T for (m, _), T in budgets.items() if m != "ingo_rank"} == {tiny_profile["iterations"][setting]} != {2}


@pytest.mark.parametrize("mutate,expected", [c[1:] for c in BAD_SYNTHETIC], ids=[c[0] for c in BAD_SYNTHETIC])
def test_a_bad_synthetic_section_is_one_line(mutate, expected, tmp_path, capsys):
    assert run_list(tmp_path, tiny(mutate)) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"error: {tmp_path / 'params.yaml'}: ")
    for needle in expected:
        assert needle in line


def bad_other(study, mutate):
    p = {study: copy.deepcopy(PARAMS[study])}
    mutate(p[study])
    return p


BAD_OTHERS = [
    ("image", lambda s: s["profiles"]["quick"].update(iterations=-1), ["image.profiles.quick.iterations = -1"]),
    ("image", lambda s: s.update(profile="quick") or s["profiles"]["quick"].update(dims=["d5"]),
     ["image.profiles.quick.dims[0] = 'd5'", "not a setting under image.dims"]),
    ("image", lambda s: s.update(dataset="mnist"), ["image.dataset = 'mnist'", "digits_stand_in, fashion_mnist"]),
    ("image", lambda s: s.update(validation_fraction=1.0), ["image.validation_fraction = 1.0", "(0, 1)"]),
    ("image", lambda s: s.update(noise_rates=[0.0, 1.5]), ["image.noise_rates = [0.0, 1.5]", "[0, 1]"]),
    ("image", lambda s: s["methods"]["sabo"].update(lr=[]), ["image.methods.sabo.lr = []", "non-empty list"]),
    ("image", lambda s: s["methods"]["bes"].update(spacin=[1.0]), ["image.methods.bes: key 'spacin'"]),
    ("image", lambda s: s["umap"].update(seed="0"), ["image.umap.seed = '0'", "integer >= 0"]),
    ("image", lambda s: s["batch_size"].pop("fashion_mnist"), ["image.batch_size", "'fashion_mnist'"]),
    ("prompt", lambda s: s.update(profile="gpu") or s["profiles"]["gpu"].update(methods=["foo"]),
     ["prompt.profiles.gpu.methods[0] = 'foo'", "not a method under prompt.methods"]),
    ("prompt", lambda s: s.update(profile="gpu") or s["profiles"]["gpu"].update(tasks=["sst3"]),
     ["prompt.profiles.gpu.tasks[0] = 'sst3'", "not a prompt task"]),
    ("prompt", lambda s: s.update(weights="fp16"), ["prompt.weights = 'fp16'", "fp32, bf16"]),
    ("prompt", lambda s: s.update(selection="best"), ["prompt.selection = 'best'", "best_dev, final"]),
    ("prompt", lambda s: s.update(attenton="sdpa"), ["prompt.attenton = 'sdpa'", "unknown key"]),
    ("prompt", lambda s: s.update(attention="flash"), ["prompt.attention = 'flash'", "sdpa, eager"]),
    ("prompt", lambda s: s.update(compile=1), ["prompt.compile = 1", "true or false"]),
    ("prompt", lambda s: s["profiles"]["offline"].update(iterations=-1),
     ["prompt.profiles.offline.iterations = -1", "integer >= 0"]),
    ("prompt", lambda s: s["methods"].update(zero_shot={}), ["prompt.methods: key 'zero_shot'", "reserved"]),
    ("prompt", lambda s: s.update(k_shot=0), ["prompt.k_shot = 0", "integer >= 1"]),
    ("bbob", lambda s: s["profiles"]["reduced"]["suites"]["bbob"].update(dims=[2, 7]),
     ["bbob.profiles.reduced.suites.bbob.dims[1] = 7", "not one of bbob's dims (2, 3, 5, 10, 20, 40)"]),
    ("bbob", lambda s: s["profiles"]["reduced"]["suites"]["bbob"].update(functions=[25]),
     ["bbob.profiles.reduced.suites.bbob.functions[0] = 25", "not one of bbob's functions (1-24)"]),
    ("bbob", lambda s: s["profiles"]["reduced"]["suites"]["bbob"].update(budget=0),
     ["bbob.profiles.reduced.suites.bbob.budget = 0", "integer >= 1"]),
    ("bbob", lambda s: s["profiles"]["reduced"]["suites"].update(
        {"bbob-biobj": {"dims": [2], "budget": 10, "instances": [1]}}),
     ["bbob.profiles.reduced.suites", "bbob, bbob-largescale, bbob-noisy"]),
    ("bbob", lambda s: s["profiles"]["reduced"]["suites"]["bbob"].update(methods=["turbo"]),
     ["bbob.profiles.reduced.suites.bbob.methods[0] = 'turbo'", "not a method of bbob.methods"]),
    ("bbob", lambda s: s["methods"]["sabo"].update(rho=[0.1, 1.0]), ["bbob.methods.sabo.rho", "single value"]),
]


@pytest.mark.parametrize("study,mutate,expected", BAD_OTHERS,
                         ids=[f"{c[0]}-{c[2][0].split(' ')[0]}" for c in BAD_OTHERS])
def test_a_bad_image_prompt_or_bbob_section_is_one_line(study, mutate, expected, tmp_path, capsys):
    assert run_list(tmp_path, bad_other(study, mutate), study) == 2
    line = one_error_line(capsys)
    for needle in expected:
        assert needle in line


@pytest.mark.parametrize("text,expected", [
    ("", "the file is empty"),
    ("# only a comment\n", "the file is empty"),
    ("- synthetic\n", "must be a mapping of study sections"),
    ("synthetic: [\n", "not valid YAML"),
    (yaml.safe_dump({**TINY, "synthethic": {}}),
     "synthethic = {}: unknown key (allowed here: synthetic, image, prompt, bbob, plugins)"),
])
def test_a_bad_file_is_one_line(text, expected, tmp_path, capsys):
    assert run_list(tmp_path, None, text=text) == 2
    assert expected in one_error_line(capsys)


def alias_bomb(levels: int = 7) -> str:
    """YAML whose last key expands to 10^levels leaves through aliases of aliases ("billion laughs")."""
    lines = ["bogus:", "  a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("text", [yaml.safe_dump(TINY) + alias_bomb(),
                                  "synthetic: &s\n  profile: tiny\nimage: *s\n"])
def test_aliases_are_refused_before_anything_expands_them(text, tmp_path, capsys):
    """A bomb of 10^7 leaves under an unknown key took 20 s and 260 MB to be refused as an unknown key (its
    message showed the value, expanding it); no parameter file needs an alias."""
    assert run_list(tmp_path, None, text=text) == 2
    line = one_error_line(capsys)
    assert "not valid YAML: aliases (*" in line and "are not allowed in a parameter file" in line, line


def test_a_missing_section_is_one_line(tmp_path, capsys):
    assert run_list(tmp_path, TINY, "image") == 2
    line = one_error_line(capsys)
    assert "image: section missing" in line and "synthetic" in line


def test_a_missing_file_is_one_line(tmp_path, capsys):
    assert cli(["list", "synthetic", "--params", str(tmp_path / "nope.yaml"), "--runs-dir", str(tmp_path)]) == 2
    assert "nope.yaml: cannot read the parameter file" in one_error_line(capsys)


def test_several_problems_are_one_line_each(tmp_path, capsys):
    def mutate(s):
        s["settings"]["d10_N6"].update(dim=0, popsize=1)
    assert run_list(tmp_path, tiny(mutate)) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 2 and "dim = 0" in err and "popsize = 1" in err and "Traceback" not in err


def test_schema_errors_come_before_anything_runs(tmp_path, capsys):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(tiny(lambda s: s.update(sigma0=0))))
    assert cli(["run", "synthetic", "--params", str(path), "--runs-dir", str(tmp_path / "runs"), "--no-track",
                "--quiet"]) == 2
    assert "synthetic.sigma0 = 0" in one_error_line(capsys)
    assert not (tmp_path / "runs").exists()


def test_validate_params_raises_usage_error():
    with pytest.raises(UsageError, match=r"synthetic\.sigma0 = 0:"):
        validate_params(tiny(lambda s: s.update(sigma0=0)))


# -- command-line arguments -----------------------------------------------------------------------
@pytest.mark.parametrize("command,args,expected", [
    ("run", ["--workers", "0"], "argument --workers: must be an integer >= 1 (got '0')"),
    ("run", ["--workers", "1.5"], "argument --workers: must be an integer >= 1"),
    ("run", ["--workers", "two"], "argument --workers: must be an integer >= 1"),
    ("run", ["--checkpoint-every", "0"], "argument --checkpoint-every: must be a finite number of seconds > 0"),
    ("run", ["--checkpoint-every", "-5"], "argument --checkpoint-every"),
    ("run", ["--checkpoint-every", "nan"], "argument --checkpoint-every"),
    ("run-one", ["--checkpoint-every", "inf"], "argument --checkpoint-every"),
    ("list", ["--seed", "-1"], "argument --seed: must be an integer >= 0"),
    ("list", ["--seed", "01x"], "argument --seed"),
    ("list", ["--no-such-option"], "unrecognized arguments: --no-such-option"),
])
def test_a_bad_argument_is_one_line(command, args, expected, tmp_path, params_file, capsys):
    assert cli([command, "synthetic", "--params", params_file, "--runs-dir", str(tmp_path), *args]) == 2
    line = one_error_line(capsys)
    assert line.startswith("sabo-bench: error: ") and expected in line


def test_a_bad_study_is_one_line(capsys):
    assert cli(["list", "synthetc"]) == 2
    assert "invalid choice: 'synthetc'" in one_error_line(capsys)


@pytest.mark.parametrize("args,expected", [
    (["--profile", "huge"], "--profile 'huge'"),
    (["--method", "sabbo"], "--method 'sabbo': study 'synthetic' has no method 'sabbo'"),
    (["--setting", "../x"], "--setting '../x'"),
    (["--function", "sphere"], "--function 'sphere'"),
])
def test_unknown_names_on_the_command_line_are_one_line(args, expected, tmp_path, params_file, capsys):
    assert cli(["list", "synthetic", "--params", params_file, "--runs-dir", str(tmp_path), *args]) == 2
    line = one_error_line(capsys)
    assert line.startswith("error: ") and expected in line


def test_known_names_select_runs(tmp_path, params_file, capsys):
    assert cli(["list", "synthetic", "--params", params_file, "--runs-dir", str(tmp_path), "--summary",
                "--method", "sabo", "--function", "levy", "--seed", "1"]) == 0
    assert "1 pending" in capsys.readouterr().out


@pytest.fixture
def params_file(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(TINY))
    return str(path)


# -- names: no path may leave runs/ ----------------------------------------------------------------
BAD_NAMES = ["../evil", "a/b", ".hidden", "", "a\\b", "..", "x" * (MAX_NAME_LENGTH + 1), "a b", "a\n"]


def test_name_rule():
    for good in ("d200_N50", "sabo_small_rho", "l12_ellipsoid", "zero_shot", "v1.2-x", "x" * MAX_NAME_LENGTH):
        assert is_valid_name(good) and check_name(good, "x") == good
    for bad in BAD_NAMES + [None, 3]:
        assert not is_valid_name(bad)


def config(**changes):
    fields = dict(study="synthetic", setting="d10_N6", problem={"name": "levy", "dim": 10}, method="sabo",
                  params={"lr": 0.1}, seed=0, budget={"max_iter": 3})
    return RunConfig(**{**fields, **changes})


@pytest.mark.parametrize("bad", BAD_NAMES)
@pytest.mark.parametrize("field", ["study", "setting", "method", "problem"])
def test_run_config_refuses_names_that_leave_runs(field, bad):
    value = {"name": bad, "dim": 10} if field == "problem" else bad
    with pytest.raises(ValueError, match=rf"RunConfig\.{field}"):
        config(**{field: value})


def test_run_config_read_back_from_a_record_is_checked_too():
    d = config().to_dict()
    assert RunConfig.from_dict(d) == config()
    with pytest.raises(ValueError, match="RunConfig.method"):
        RunConfig.from_dict({**d, "method": "../../etc"})


def test_run_config_without_a_problem_name_is_fine():
    assert config(problem={"dim": 3}).label.startswith("d10_N6/problem/")


def test_the_image_schema_knows_every_loadable_dataset():
    """The schema keeps its own copy of the data set names (the loaders are heavy to import)."""
    from replication.image import data
    from replication.image.params import DATASETS

    assert set(DATASETS) == set(data.DATASETS)


@pytest.mark.parametrize("methods, where", [
    ({"cmaes": {"options": {"maxfevals": "9**9**8"}}}, "synthetic.methods.cmaes.options.maxfevals = '9**9**8'"),
    ({"cma_big": {"optimizer": "cmaes", "options": {"tolfun": "1e-11", "CMA_diagonal": True}}},
     "synthetic.methods.cma_big.options.tolfun = '1e-11'"),
])
def test_string_pycma_options_are_refused_before_pycma_evaluates_them(methods, where):
    """pycma eval()s string-valued options: `maxfevals: "9**9**8"` hung the parameter check before a study
    (it computes a number of 10^8 digits) until it was killed; numbers pass."""
    params = tiny(lambda s: s["methods"].update(methods))
    with pytest.raises(UsageError) as refused:
        validate_params(params)
    [line] = str(refused.value).splitlines()
    assert line.startswith(f"params.yaml: {where}: must not be a string: pycma evaluates string-valued options")
    for grid in methods.values():
        grid["options"] = {key: 1e-11 if isinstance(value, str) else value for key, value in grid["options"].items()}
    validate_params(tiny(lambda s: s["methods"].update(methods)))
