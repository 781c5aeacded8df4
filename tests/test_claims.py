"""Claim checks of the synthetic report on hand-made curves, and the CI regression comparison."""
import numpy as np
import pytest

from replication.claims import NOT_REPRODUCED, NOT_RUN, REPRODUCED, check_against_expected, load_claims
from replication.storage import write_json
from replication.synthetic.report import CHECKERS, CLAIMS_FILE, Context, Group

NIT = np.arange(0, 1001, 10, dtype=float)


def group(method, decades_per_1000, setting="s", function="f", seeds=3, status="completed"):
    """Error falling linearly in log scale: log10 E = 1 - decades_per_1000 * nit / 1000."""
    g = Group(setting, function, method)
    for k in range(seeds):
        err = 10 ** (1 - (decades_per_1000 + 0.01 * k) * NIT / 1000)
        g.curves.append((NIT, 20 * NIT, err))
        g.statuses.append(status)
        g.safeguards.append(0)
    return g


def ctx(*groups):
    return Context({(g.setting, g.function, g.method): g for g in groups}, ["s"], ["f"])


def test_convergence_criterion():
    assert group("a", 3).converged()
    assert not group("a", 0.5).converged()          # < 1 decade
    g = group("a", 3)
    g.curves = [(NIT, 20 * NIT, np.maximum(10 ** (1 - NIT / 100), 0.01))] * 3  # stalled after 3 decades
    assert not g.converged()
    g.curves = [(NIT, 20 * NIT, np.maximum(10 ** (1 - NIT / 10), 1e-9))] * 3  # 10 decades, at the floor
    assert g.converged()


def test_converges_and_fails_checks():
    c = ctx(group("ingo", 3), group("bes", -0.5))
    assert CHECKERS["converges"]({"methods": ["ingo"]}, c)[0] == REPRODUCED
    assert CHECKERS["converges"]({"methods": ["bes"]}, c)[0] == NOT_REPRODUCED
    assert CHECKERS["fails"]({"methods": ["bes"]}, c)[0] == REPRODUCED
    assert CHECKERS["diverges"]({"methods": ["bes"]}, c)[0] == REPRODUCED
    assert CHECKERS["diverges"]({"methods": ["ingo"]}, c)[0] == NOT_REPRODUCED
    assert CHECKERS["fails"]({"methods": ["mmes"]}, c)[0] == NOT_RUN


def test_iteration_ratio_measures_relative_speed():
    c = ctx(group("sabo", 2.0), group("ingo", 3.0))
    verdict, _, measured = CHECKERS["iteration_ratio"]({"a": "sabo", "b": "ingo", "low": 1.0, "high": 2.0}, c)
    ratio = float(measured.split("median ratio ")[1].split(")")[0])
    assert verdict == REPRODUCED and ratio == pytest.approx(1.5, abs=0.05)  # 3/2 decades per iteration
    verdict, _, _ = CHECKERS["iteration_ratio"]({"a": "sabo", "b": "ingo", "low": 0.0, "high": 1.0}, c)
    assert verdict == NOT_REPRODUCED


def test_lower_final_error_and_progress_between():
    c = ctx(group("ingo", 3), group("cmaes", 1.5))
    assert CHECKERS["lower_final_error"]({"a": ["ingo"], "b": ["cmaes"]}, c)[0] == REPRODUCED
    assert CHECKERS["lower_final_error"]({"a": ["cmaes"], "b": ["ingo"]}, c)[0] == NOT_REPRODUCED
    assert CHECKERS["progress_between"]({"methods": ["cmaes"], "low": 1.0, "high": 2.0}, c)[0] == REPRODUCED


def test_partial_coverage_is_stated():
    c = Context({("s", "f", "ingo"): group("ingo", 3)}, ["s", "t"], ["f"])
    _, _, measured = CHECKERS["converges"]({"methods": ["ingo"]}, c)
    assert "only 1 of 2 cases run" in measured


def test_every_claim_in_the_file_has_a_known_check_and_a_unique_id():
    claims = load_claims(CLAIMS_FILE)
    assert len(claims) >= 10
    assert all(c["check"]["kind"] in CHECKERS and c["statement"] and c["source"] for c in claims)


def test_regression_against_expected(tmp_path):
    expected = tmp_path / "expected.json"
    write_json(expected, {"reproduced": ["a", "b"]})
    verdicts = [{"id": "a", "verdict": REPRODUCED, "measurement": ""},
                {"id": "b", "verdict": NOT_REPRODUCED, "measurement": "1/2 cases"},
                {"id": "c", "verdict": NOT_REPRODUCED, "measurement": ""}]
    assert check_against_expected(verdicts, expected) == ["b: not reproduced (1/2 cases)"]
    assert check_against_expected(verdicts[:1], expected) == ["b: no longer evaluated"]
