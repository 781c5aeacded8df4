"""Claim checks of the synthetic report on hand-made curves, their bootstrap intervals and three-way verdicts,
the CI regression comparison, and the claims files themselves (verbatim quotes, disjoint ranges)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from replication import bootstrap
from replication.bootstrap import Interval
from replication.claims import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    NOT_RUN,
    REPRODUCED,
    Region,
    at_least,
    check_against_expected,
    decide,
    expected_file,
    load_claims,
    parse_interval,
    read_expected,
)
from replication.errors import UsageError
from replication.storage import write_json
from replication.synthetic.report import CHECKERS, CLAIMS_FILE, Context, Group

ROOT = Path(__file__).resolve().parents[1]
NIT = np.arange(0, 1001, 10, dtype=float)


def group(method, decades_per_1000=None, setting="s", function="f", seeds=3, status="completed", rates=None):
    """Error falling linearly in log scale: log10 E = 1 - rate * nit / 1000, seed k's rate decades_per_1000 + 0.01 k
    or ``rates[k]`` (its log10(E_T/E_0) is -rate)."""
    g = Group(setting, function, method)
    for rate in rates if rates is not None else [decades_per_1000 + 0.01 * k for k in range(seeds)]:
        err = 10 ** (1 - rate * NIT / 1000)
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


def test_iteration_ratio_measures_relative_speed_per_iteration_and_per_evaluation():
    sabo = group("sabo", 2.0)
    sabo.curves = [(nit, 2 * nfev, e) for nit, nfev, e in sabo.curves]  # two rounds per iteration
    c = ctx(sabo, group("ingo", 3.0))
    verdict, _, measured, _ = CHECKERS["iteration_ratio"]({"a": "sabo", "b": "ingo", "range": "(1, 2]"}, c)
    ratio = float(measured.split("median ratio ")[1].split(")")[0])
    per_eval = float(measured.split("per evaluation: ")[1].split("(median ")[1].split(")")[0])
    assert verdict == REPRODUCED and ratio == pytest.approx(1.5, abs=0.05)  # 3/2 decades per iteration
    assert per_eval == pytest.approx(3.0, abs=0.1)
    verdict, _, _, reason = CHECKERS["iteration_ratio"]({"a": "sabo", "b": "ingo", "range": "[0, 1)"}, c)
    assert verdict == NOT_REPRODUCED and "0 of 1 cases in [0, 1)" in reason


def test_lower_final_error_and_progress_between():
    c = ctx(group("ingo", 3), group("cmaes", 1.5))
    assert CHECKERS["lower_final_error"]({"a": ["ingo"], "b": ["cmaes"]}, c)[0] == REPRODUCED
    assert CHECKERS["lower_final_error"]({"a": ["cmaes"], "b": ["ingo"]}, c)[0] == NOT_REPRODUCED
    assert CHECKERS["progress_between"]({"methods": ["cmaes"], "low": 1.0, "high": 2.0}, c)[0] == REPRODUCED


def test_verdict_texts_keep_the_sign_and_the_digits_that_decide_them():
    """One sign convention, log10(E_T/E_0) (negative: the error fell), with the digits that separate -0.997 from
    the -1 threshold; a shortened list says how many it left out."""
    near = group("ingo", rates=[0.997] * 3)
    verdict, _, measured, reason = CHECKERS["converges"]({"methods": ["ingo"]}, ctx(near))
    assert verdict == NOT_REPRODUCED and "s/f/ingo -0.997 (95% interval -0.997 to -0.997)" in measured
    assert reason.startswith("1 of 1 cases did not converge: s/f/ingo at -0.997;")
    near = group("ingo", rates=[0.9996] * 3)  # three digits would round it onto the threshold
    assert "s/f/ingo at -0.9996" in CHECKERS["converges"]({"methods": ["ingo"]}, ctx(near))[3]
    grew = [group("bes", -0.5, function=f"f{i}") for i in range(5)]
    c = Context({(g.setting, g.function, g.method): g for g in grew}, ["s"], [g.function for g in grew])
    _, _, measured, reason = CHECKERS["progress_between"]({"methods": ["bes"], "low": 0.1, "high": 1.0}, c)
    assert "s/f0/bes +" in measured  # the error grew: positive, as in every other check
    assert reason.startswith("5 of 5 cases outside [-1, -0.1]: ") and ", ... (1 more)" in reason


def test_a_case_on_the_wrong_side_is_named_by_how_far_past_the_threshold_it_is():
    """Issue 33: 'the one nearest the threshold ... at -14.9' named the case furthest past it. One case is named
    as it is; several are listed nearest the threshold first."""
    far = group("cmaes", rates=[14.8, 14.9, 15.0])
    verdict, _, _, reason = CHECKERS["fails"]({"methods": ["cmaes"]}, ctx(far))
    assert verdict == NOT_REPRODUCED
    assert reason.startswith("1 of 1 cases converged: s/f/cmaes at -14.9;") and "nearest" not in reason
    both = Context({("s", f, "cmaes"): group("cmaes", rates=r, function=f)
                    for f, r in (("far", [14.8, 14.9, 15.0]), ("near", [1.2, 1.25, 1.3]))}, ["s"], ["far", "near"])
    reason = CHECKERS["fails"]({"methods": ["cmaes"]}, both)[3]
    assert reason.startswith("2 of 2 cases converged (nearest the threshold -1 first): s/near/cmaes at -1.25, "
                             "s/far/cmaes at -14.9;")


def test_a_claim_just_past_its_threshold_with_a_wide_spread_is_inconclusive():
    """The verdict follows the bootstrap interval: a median just short of the -1 decade threshold with one seed far
    past it (the seeds could go either way) is inconclusive; the same median with a narrow spread, and a case far
    on either side, stay not reproduced or reproduced."""
    wide = group("ingo", rates=[0.8, 0.9, 1.5])     # median -0.9; seed 3 converged: a majority in 7/27 of resamples
    verdict, _, measured, reason = CHECKERS["converges"]({"methods": ["ingo"]}, ctx(wide))
    assert verdict == INCONCLUSIVE and "0 (95% interval 0 to 1) of 1 cases converge" in measured
    assert "s/f/ingo -0.9 (95% interval -1.5 to -0.8)" in measured
    share = float(reason.split("all 1 converge together in ")[1].split("%")[0]) / 100
    assert share == pytest.approx(7 / 27, abs=3 * np.sqrt(7 / 27 * 20 / 27 / bootstrap.RESAMPLES))
    narrow = group("ingo", rates=[0.89, 0.9, 0.91])
    assert CHECKERS["converges"]({"methods": ["ingo"]}, ctx(narrow))[0] == NOT_REPRODUCED
    assert CHECKERS["converges"]({"methods": ["ingo"]}, ctx(group("ingo", rates=[0.5, 0.52, 0.54])))[0] == \
        NOT_REPRODUCED
    assert CHECKERS["converges"]({"methods": ["ingo"]}, ctx(group("ingo", rates=[3, 3.01, 3.02])))[0] == REPRODUCED
    assert CHECKERS["fails"]({"methods": ["ingo"]}, ctx(wide))[0] == INCONCLUSIVE


def test_methods_on_one_case_are_resampled_on_the_same_seeds():
    """Seed k of every method on a case starts from the same mu0: a resample draws the same seeds for each. Here
    INGO converges only on seed 0 and SABO only on seed 1: each alone is uncertain, but no resample has both
    converge (a majority of seed 0 excludes one of seed 1), so 'both converge' is not reproduced."""
    ingo, sabo = group("ingo", rates=[1.5, 0.9, 0.9]), group("sabo", rates=[0.9, 1.5, 0.9])
    assert (ingo.rows() == sabo.rows()).all() and not (ingo.rows() == group("x", 1, function="g").rows()).all()
    assert CHECKERS["converges"]({"methods": ["ingo"]}, ctx(ingo, sabo))[0] == INCONCLUSIVE
    verdict, _, measured, reason = CHECKERS["converges"]({"methods": ["ingo", "sabo"]}, ctx(ingo, sabo))
    assert verdict == NOT_REPRODUCED and "all 2 converge together in 0.0% of the resamples" in reason


def test_a_share_of_cases_resamples_the_cases_unless_every_case_must_hold():
    """'In most cases' (min_fraction < 1) is about cases in general: the cases are resampled, so 3 of 5 comparisons
    against a need of 50% is inconclusive; a claim about every named case keeps its cases."""
    fast = {f: group("ingo", 3, function=f) for f in "abcde"}
    other = {f: group("cmaes", rate, function=f) for f, rate in zip("abcde", (2, 2, 2, 4, 4))}
    c = Context({(g.setting, g.function, g.method): g for g in [*fast.values(), *other.values()]}, ["s"], list("abcde"))
    verdict, _, measured, _ = CHECKERS["lower_final_error"]({"a": ["ingo"], "b": ["cmaes"], "min_fraction": 0.5}, c)
    assert verdict == INCONCLUSIVE and "3/5 comparisons hold, share 0.60 (95% interval 0.20 to 1.00)" in measured
    verdict, _, measured, _ = CHECKERS["lower_final_error"]({"a": ["ingo"], "b": ["cmaes"], "min_fraction": 0.6}, c)
    assert verdict == INCONCLUSIVE
    kept = CHECKERS["lower_final_error"]({"a": ["ingo"], "b": ["cmaes"], "functions": ["a", "b", "c"]}, c)
    assert kept[0] == REPRODUCED and "share 1.00 (95% interval 1.00 to 1.00)" in kept[2]


def test_verdicts_from_intervals():
    """Reproduced: the whole interval on the claim's side; not reproduced: none of it; inconclusive: both. Open
    ends exclude their point; an interval wider than a range on both sides is inconclusive, not refuted."""
    assert decide(Interval(2.5, 2.1, 3.0), at_least(2)) == REPRODUCED
    assert decide(Interval(2.0, 2.0, 2.0), at_least(2)) == REPRODUCED
    assert decide(Interval(2.0, 2.0, 2.0), Region(low=2, low_closed=False)) == NOT_REPRODUCED
    assert decide(Interval(1.9, 1.5, 2.0), at_least(2)) == INCONCLUSIVE
    assert decide(Interval(1.9, 1.5, 1.99), at_least(2)) == NOT_REPRODUCED
    two = parse_interval("[0, 2]")
    assert decide(Interval(2.05, 1.97, 2.09), two) == INCONCLUSIVE
    assert decide(Interval(2.05, 2.01, 2.09), two) == NOT_REPRODUCED
    assert decide(Interval(1.0, -1.0, 3.0), two) == INCONCLUSIVE
    assert decide(Interval(-0.5, -1.0, -0.1), two) == NOT_REPRODUCED
    assert decide(Interval(1.0, 0.0, 2.0), two) == REPRODUCED
    assert decide(Interval(1.0, 0.0, 2.0), parse_interval("(0, 2]")) == INCONCLUSIVE
    assert list(two(np.array([-0.1, 0.0, 2.0, 2.1, np.nan]))) == [False, True, True, False, False]


def test_the_interval_is_the_percentile_interval_and_contains_the_measured_value():
    values = np.arange(1000.0)
    measured = bootstrap.interval(500.0, values)
    assert (measured.low, measured.high) == (24.0, 975.0)   # 2.5% and 97.5% without interpolation
    skewed = bootstrap.interval(3.0, [5.0, 6.0, np.nan, 7.0])
    assert (skewed.value, skewed.low, skewed.high) == (3.0, 3.0, 7.0)  # widened to the value; NaN left out
    assert bootstrap.interval(4.0, [np.nan, np.nan]) == Interval(4.0, 4.0, 4.0)
    draws = bootstrap.draws("k", 5)
    assert draws.shape == (bootstrap.RESAMPLES, 5) and draws.min() == 0 and draws.max() == 4
    assert not draws.flags.writeable and (bootstrap.draws("k", 5) == draws).all()
    assert not (bootstrap.draws("other", 5) == draws).all()
    with pytest.raises(ValueError, match="n must be at least 1"):
        bootstrap.draws("k", 0)


DETERMINISM_SCRIPT = """
import json, sys
sys.path.insert(0, {tests!r})
from test_claims import ctx, group
from replication.synthetic.report import CHECKERS
c = ctx(group("ingo", rates=[0.8, 0.9, 1.5]), group("sabo", rates=[0.7, 1.1, 1.3]))
ratio = {{"a": "sabo", "b": "ingo", "range": "[0.5, 2]", "min_fraction": 0.5}}
print(json.dumps([CHECKERS["converges"]({{"methods": ["ingo", "sabo"]}}, c), CHECKERS["iteration_ratio"](ratio, c)]))
"""


def test_the_same_runs_give_the_same_intervals_in_any_process():
    """The bootstrap's draws are seeded from a fixed number and a stable hash of their key (not Python's salted
    hash()): two processes with different hash seeds give the same measurements, byte for byte."""
    outputs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed,
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        run = subprocess.run([sys.executable, "-c", DETERMINISM_SCRIPT.format(tests=str(ROOT / "tests"))],
                             capture_output=True, text=True, env=env, cwd=ROOT)
        assert run.returncode == 0, run.stderr
        outputs.append(run.stdout)
    assert outputs[0] == outputs[1] and "95% interval" in outputs[0]


def test_partial_coverage_is_stated():
    c = Context({("s", "f", "ingo"): group("ingo", 3)}, ["s", "t"], ["f"])
    _, _, measured, _ = CHECKERS["converges"]({"methods": ["ingo"]}, c)
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
    assert check_against_expected({"claims": verdicts}, read_expected(expected)) == ["b: not reproduced (1/2 cases)"]
    assert check_against_expected({"claims": verdicts[:1]}, read_expected(expected)) == ["b: no longer evaluated"]


def test_score_regression_against_expected(tmp_path):
    """A score may drop by at most the recorded tolerance; a score that disappeared is a regression."""
    expected = tmp_path / "expected.json"
    outcome = {"claims": [], "scores": {"x": 80.0, "y": 50.0}, "score_tolerance": 3.0}
    write_json(expected, expected_file("ci", outcome))
    assert check_against_expected({"claims": [], "scores": {"x": 77.0, "y": 90.0}}, read_expected(expected)) == []
    assert check_against_expected({"claims": [], "scores": {"x": 76.9, "y": 50.0}}, read_expected(expected)) == [
        "x: 76.90, recorded 80.00 (tolerance 3)"]
    assert check_against_expected({"claims": [], "scores": {"y": float("nan")}}, read_expected(expected)) == [
        "x: no score any more (recorded 80.00)", "y: nan, recorded 50.00 (tolerance 3)"]


def test_per_score_tolerance_against_expected(tmp_path):
    """benchmarks/ci_spread.py writes one tolerance per score (from the measured spread): each score is held to
    its own; a file whose tolerances miss a score, or hold a non-number, is refused in one line."""
    expected = tmp_path / "expected.json"
    write_json(expected, {"profile": "ci", "reproduced": [], "scores": {"x": 80.0, "y": 50.0},
                          "score_tolerance": {"x": 1.5, "y": 12.0}})
    loaded = read_expected(expected)
    assert check_against_expected({"claims": [], "scores": {"x": 78.5, "y": 38.0}}, loaded) == []
    assert check_against_expected({"claims": [], "scores": {"x": 78.4, "y": 37.9}}, loaded) == [
        "x: 78.40, recorded 80.00 (tolerance 1.5)", "y: 37.90, recorded 50.00 (tolerance 12)"]
    for bad in ({"x": 1.5}, {"x": 1.5, "y": "2"}, {"x": 1.5, "y": True}, {"x": 1.5, "y": float("inf")}):
        write_json(expected, {"reproduced": [], "scores": {"x": 80.0, "y": 50.0}, "score_tolerance": bad})
        with pytest.raises(UsageError, match=r"score_tolerance.*for every score") as info:
            read_expected(expected)
        assert "\n" not in str(info.value)


def test_a_mean_of_scores_is_checked_against_its_own_tolerance(tmp_path):
    """score_means: the mean of listed scores (scores too noisy to check one by one, checked together)."""
    expected = tmp_path / "expected.json"
    write_json(expected, {"reproduced": [], "scores": {},
                          "score_means": {"all": {"keys": ["x", "y"], "value": 50.0, "tolerance": 5.0}}})
    loaded = read_expected(expected)
    assert check_against_expected({"claims": [], "scores": {"x": 90.0, "y": 0.0}}, loaded) == []  # mean 45
    assert check_against_expected({"claims": [], "scores": {"x": 89.8, "y": 0.0}}, loaded) == [
        "all: 44.90, recorded 50.00 (tolerance 5)"]
    assert check_against_expected({"claims": [], "scores": {"x": 90.0}}, loaded) == ["all: no score 'y' any more"]
    for bad in ({"all": {"keys": [], "value": 1.0, "tolerance": 1.0}}, {"all": {"keys": ["x"], "value": "1",
                                                                               "tolerance": 1.0}}):
        write_json(expected, {"reproduced": [], "score_means": bad})
        with pytest.raises(UsageError, match="score_means"):
            read_expected(expected)


def _paper_tex() -> str:
    """The paper's LaTeX: $SABO_PAPER_TEX, or the project's shared copy next to the repository."""
    candidates = [os.environ.get("SABO_PAPER_TEX", ""), ROOT.parent / "shared" / "paper" / "sabo-paper.tex",
                  Path("/work/shared/paper/sabo-paper.tex")]
    for path in candidates:
        if path and Path(path).is_file():
            return Path(path).read_text()
    pytest.skip("the paper's LaTeX is not on this machine (set SABO_PAPER_TEX to check the quotes)")


def _plain(text: str) -> str:
    """LaTeX reduced to words: markup commands dropped (their arguments kept), references and
    citations removed, math delimiters and braces dropped, whitespace and case normalised."""
    text = re.sub(r"\\(?:textit|textbf|emph|text|mathrm|underline)\{([^{}]*)\}", r"\1", text)
    text = re.sub(r"\\(?:cite|ref|label)\{[^{}]*\}", "", text)
    text = re.sub(r"[${}]", "", re.sub(r"[\\~]", " ", text))
    return re.sub(r"\s+", " ", text).strip().lower()


@pytest.mark.parametrize("claims_file", sorted(ROOT.glob("replication/*/claims.yaml")), ids=lambda p: p.parent.name)
def test_every_statement_quotes_the_paper_verbatim(claims_file):
    """Each stretch of a statement between '...' (omission) and '[...]' (our insertion) is in the paper's
    text word for word; how a claim reads a table or figure goes in `reading`, not in the quote."""
    paper = _plain(_paper_tex())
    for claim in load_claims(claims_file):
        stretches = [s for s in re.split(r"\.\.\.|\[[^\]]*\]", claim["statement"]) if s.strip(" .,")]
        assert stretches, claim["id"]
        for stretch in stretches:
            assert _plain(stretch).strip(" .,") in paper, f"{claim['id']}: not verbatim in the paper: {stretch!r}"


def test_mutually_exclusive_rate_claims_have_disjoint_ranges():
    """'slightly slower' and 'faster in some cases' must not both hold for one ratio (they shared 1.00)."""
    by_id = {c["id"]: c["check"] for c in load_claims(CLAIMS_FILE)}
    slower = parse_interval(by_id["sabo_slightly_slower_than_ingo"]["range"])
    faster = parse_interval(by_id["sabo_faster_than_ingo_on_levy_special_cases"]["range"])
    for ratio in np.linspace(0, 3, 3001):
        assert not (slower(ratio) and faster(ratio)), ratio
    assert slower(1.5) and faster(0.5) and not slower(1.0) and not faster(1.0)
