"""Claim checks of the synthetic report on hand-made curves, the CI regression comparison, and the
claims files themselves (verbatim quotes, disjoint ranges)."""
import os
import re
from pathlib import Path

import numpy as np
import pytest

from replication.claims import (
    NOT_REPRODUCED,
    NOT_RUN,
    REPRODUCED,
    check_against_expected,
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
    near = group("ingo", 0.5)
    near.median_decades = lambda: -0.997
    verdict, _, measured, reason = CHECKERS["converges"]({"methods": ["ingo"]}, ctx(near))
    assert verdict == NOT_REPRODUCED and "s/f/ingo (-0.997)" in measured and reason.endswith("s/f/ingo at -0.997")
    near.median_decades = lambda: -0.9996  # three digits would round it onto the threshold
    assert CHECKERS["converges"]({"methods": ["ingo"]}, ctx(near))[3].endswith("s/f/ingo at -0.9996")
    grew = [group("bes", -0.5, function=f"f{i}") for i in range(5)]
    c = Context({(g.setting, g.function, g.method): g for g in grew}, ["s"], [g.function for g in grew])
    _, _, measured, reason = CHECKERS["progress_between"]({"methods": ["bes"], "low": 0.1, "high": 1.0}, c)
    assert "s/f0/bes +" in measured  # the error grew: positive, as in every other check
    assert reason.startswith("5 of 5 cases outside [-1, -0.1]: ") and reason.endswith(", ... (1 more)")


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
