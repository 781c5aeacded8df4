"""Machine-checkable claims: the paper's statements kept as data, checked against our runs.

A study keeps its claims in a YAML list; each entry has

    id:         short identifier
    statement:  the paper's words, verbatim: ``...`` marks an omission and ``[...]`` our insertion
                (a resolved reference, a symbol written out); ``tests/test_claims.py`` checks
                every statement against the paper's LaTeX
    reading:    (optional) our words: how a table or figure is read, or what the claim re-checks;
                shown apart from the quote, marked as ours
    source:     where in the paper
    check:      {kind: <name>, ...}   the operationalisation, evaluated by the study's checker

A checker maps a ``check`` to a :class:`Verdict`: ``reproduced``, ``not reproduced``,
``inconclusive``, or ``not run`` (none of the runs the check needs has a record). A quantitative
check measures a statistic with its bootstrap interval (:mod:`replication.bootstrap`) and
:func:`decide` compares the interval with the :class:`Region` the claim puts the statistic in:
inside it, reproduced; outside it, not reproduced; reaching both, inconclusive. A checker returns
``(verdict, operationalisation, measurement)`` or, with a fourth element, the one-line reason a
claim is not reproduced or inconclusive, generated from the data (the margin it missed by, the
budget, the stand-in data, the rho reading), shown with the verdict. ``check_against_expected``
compares verdicts (and a report's scores) with a recorded expectation, so CI fails when a
claim that held stops holding or a score drops. ``write_report`` writes a study's report page and its claims file;
``replacement_refusal`` says why a new report must not replace the one already there.
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import yaml

from .bootstrap import LEVEL, Interval
from .errors import UsageError, one_line
from .storage import atomic_write_bytes, read_json, write_json

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_RUN = "reproduced", "not reproduced", "inconclusive", "not run"
REPORT_META = ("profile", "records", "runs")
"""What every claims file states about its report: the profile, and the records it was made
from out of the runs that profile defines (:func:`replacement_refusal` reads them)."""


@dataclass
class Verdict:
    id: str
    statement: str
    source: str
    operationalisation: str
    measurement: str
    verdict: str
    reading: str = ""
    reason: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Region:
    """Where a claim puts its statistic: the interval from ``low`` to ``high`` of the real line, each
    end closed (included) or open. Called with a number: whether it lies inside."""

    low: float = -math.inf
    high: float = math.inf
    low_closed: bool = True
    high_closed: bool = True

    def __call__(self, x):
        """Whether ``x`` lies inside (elementwise for an array; NaN: outside)."""
        return ((np.greater_equal(x, self.low) if self.low_closed else np.greater(x, self.low))
                & (np.less_equal(x, self.high) if self.high_closed else np.less(x, self.high)))

    def below(self, x: float) -> bool:
        return x < self.low or (x == self.low and not self.low_closed)

    def above(self, x: float) -> bool:
        return x > self.high or (x == self.high and not self.high_closed)

    @property
    def text(self) -> str:
        if self.high == math.inf:
            return f"{'>=' if self.low_closed else '>'} {self.low:g}"
        if self.low == -math.inf:
            return f"{'<=' if self.high_closed else '<'} {self.high:g}"
        if self.low == self.high:
            return f"= {self.low:g}"
        return f"{'[' if self.low_closed else '('}{self.low:g}, {self.high:g}{']' if self.high_closed else ')'}"


def at_least(x: float) -> Region:
    return Region(low=x)


def parse_interval(text: str) -> Region:
    """``"(1, 2]"`` -> the region ``1 < x <= 2``.

    Brackets give closed ends, parentheses open ones, so that mutually exclusive claims can
    share an end point without both holding there.
    """
    m = re.fullmatch(r"\s*([\[(])\s*([-+0-9.eE]+|-inf)\s*,\s*([-+0-9.eE]+|inf)\s*([\])])\s*", str(text))
    if m is None:
        raise ValueError(f"range {text!r} must be an interval such as '[0.5, 2]', '(1, 2]' or '[0, 1)'")
    lo_closed, lo, hi, hi_closed = m.group(1) == "[", float(m.group(2)), float(m.group(3)), m.group(4) == "]"
    if lo > hi:
        raise ValueError(f"range {text!r}: the lower end exceeds the upper one")
    return Region(lo, hi, lo_closed, hi_closed)


def decide(measured: Interval, region: Region) -> str:
    """Reproduced when the whole interval of ``measured`` lies in ``region``, not reproduced when none
    of it does, inconclusive when it reaches both."""
    if region(measured.low) and region(measured.high):
        return REPRODUCED
    if region.below(measured.high) or region.above(measured.low):
        return NOT_REPRODUCED
    return INCONCLUSIVE


def straddle_text(measured: Interval, region: Region, fmt=lambda x: f"{x:.2f}") -> str:
    """Why a verdict is inconclusive: 'the 95% interval 0.98 to 2.40 reaches both sides of [0, 2]'."""
    return (f"the {LEVEL:.0%} interval {fmt(measured.low)} to {fmt(measured.high)} reaches both sides of "
            f"{region.text}")


def load_claims(path) -> list[dict]:
    with open(path) as fh:
        claims = yaml.safe_load(fh)
    ids = [c["id"] for c in claims]
    if len(ids) != len(set(ids)):
        raise ValueError(f"{path}: claim ids must be unique")
    return claims


def evaluate(claims: list[dict], checkers: dict, context) -> list[Verdict]:
    """Evaluate every claim with ``checkers[claim['check']['kind']](check, context)``.

    A checker returns ``(verdict, operationalisation, measurement)``, optionally with the reason a claim is
    not reproduced or inconclusive (ignored for the other verdicts).
    """
    out = []
    for claim in claims:
        kind = claim["check"]["kind"]
        if kind not in checkers:
            raise ValueError(f"claim {claim['id']}: unknown check kind {kind!r}; known: {sorted(checkers)}")
        verdict, operationalisation, measurement, *reason = checkers[kind](claim["check"], context)
        out.append(Verdict(claim["id"], claim["statement"].strip(), claim["source"], operationalisation,
                           measurement, verdict, claim.get("reading", "").strip(),
                           reason[0] if reason and verdict in (NOT_REPRODUCED, INCONCLUSIVE) else ""))
    return out


def count_line(verdicts: list[Verdict]) -> str:
    """E.g. '1 inconclusive, 3 not reproduced, 7 reproduced.'"""
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v.verdict] = counts.get(v.verdict, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) + "."


def render_markdown(verdicts: list[Verdict]) -> str:
    lines = ["| claim | paper | checked as | measured | verdict |", "|---|---|---|---|---|"]
    for v in verdicts:
        paper = f"\"{v.statement}\" ({v.source})" + (f" *Our reading:* {v.reading}" if v.reading else "")
        verdict = f"**{v.verdict}**" + (f": {v.reason}" if v.reason else "")
        cells = [f"`{v.id}`", paper, v.operationalisation, v.measurement, verdict]
        lines.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return "\n".join(lines)


def read_expected(path) -> dict:
    """The expected-claims file ``path`` (what ``--record-expected`` writes), or a one-line
    :class:`~replication.errors.UsageError` saying why it cannot be used."""
    try:
        expected = read_json(path)
    except OSError as exc:
        raise UsageError(f"--check-claims {str(path)!r}: cannot be read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise UsageError(f"--check-claims {str(path)!r}: not a JSON file ({one_line(exc)})") from None
    scores = expected.get("scores", {}) if isinstance(expected, dict) else None
    tolerance = expected.get("score_tolerance", 0.0) if isinstance(expected, dict) else None
    tolerances = list(tolerance.values()) if isinstance(tolerance, dict) else [tolerance]
    if not (isinstance(expected, dict) and isinstance(expected.get("reproduced"), list)
            and all(isinstance(c, str) for c in expected["reproduced"]) and isinstance(scores, dict)
            and all(_is_number(v) for v in [*scores.values(), *tolerances])
            and (not isinstance(tolerance, dict) or set(tolerance) == set(scores))
            and _valid_means(expected.get("score_means", {}))):
        raise UsageError(f"--check-claims {str(path)!r}: must hold {{\"reproduced\": [claim ids], optional "
                         "\"scores\": {name: number}, \"score_tolerance\": a number, or {name: number} for every "
                         "score, optional \"score_means\": {name: {\"keys\": [score names], \"value\": number, "
                         "\"tolerance\": number}}}, as --record-expected or benchmarks/ci_spread.py writes")
    return expected


def _valid_means(means) -> bool:
    return isinstance(means, dict) and all(
        isinstance(m, dict) and set(m) == {"keys", "value", "tolerance"} and isinstance(m["keys"], list)
        and m["keys"] and all(isinstance(k, str) for k in m["keys"]) and _is_number(m["value"])
        and _is_number(m["tolerance"]) for m in means.values())


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def score_tolerance(expected: dict, key: str) -> float:
    """The points ``expected`` allows score ``key`` to lose: its own entry, or the file's single number."""
    tolerance = expected.get("score_tolerance", 0.0)
    return float(tolerance[key] if isinstance(tolerance, dict) else tolerance)


def check_against_expected(outcome: dict, expected: dict) -> list[str]:
    """Messages for every regression of a report's ``outcome`` against ``expected`` (:func:`read_expected`).

    A regression is a claim listed as reproduced there that no longer is, or (when the file
    holds ``scores``) a score of the report (higher is better, e.g. a selected accuracy) more
    than its tolerance (:func:`score_tolerance`) below the recorded value, or missing; or (when
    it holds ``score_means``) the mean of the listed scores more than its tolerance below its value.
    """
    by_id = {v["id"]: v for v in outcome["claims"]}
    failures = []
    for claim_id in expected["reproduced"]:
        v = by_id.get(claim_id)
        if v is None:
            failures.append(f"{claim_id}: no longer evaluated")
        elif v["verdict"] != REPRODUCED:
            failures.append(f"{claim_id}: {v['verdict']} ({v['measurement']})")
    scores = outcome.get("scores", {})
    for key, value in expected.get("scores", {}).items():
        now, tolerance = scores.get(key), score_tolerance(expected, key)
        if now is None:
            failures.append(f"{key}: no score any more (recorded {value:.2f})")
        elif not now >= value - tolerance:
            failures.append(f"{key}: {now:.2f}, recorded {value:.2f} (tolerance {tolerance:.3g})")
    for name, mean in expected.get("score_means", {}).items():
        missing = [key for key in mean["keys"] if key not in scores]
        now = float(np.mean([scores[key] for key in mean["keys"]])) if not missing else None
        if missing:
            failures.append(f"{name}: no score {missing[0]!r} any more")
        elif not now >= mean["value"] - mean["tolerance"]:
            failures.append(f"{name}: {now:.2f}, recorded {mean['value']:.2f} (tolerance {mean['tolerance']:.3g})")
    return failures


def expected_file(profile: str, outcome: dict) -> dict:
    """What ``--record-expected`` writes: the reproduced claims, and the report's scores if it has any."""
    out = {"profile": profile, "reproduced": [v["id"] for v in outcome["claims"] if v["verdict"] == REPRODUCED]}
    if outcome.get("scores"):
        out.update(scores=outcome["scores"], score_tolerance=outcome["score_tolerance"])
    return out


def write_report(out_dir, name: str, markdown: list[str], verdicts: list[Verdict], meta: dict,
                 files=(), scores: dict | None = None, score_tolerance: float = 0.0) -> dict:
    """Write a study's report: ``<out_dir>/<name>.md`` and ``<out_dir>/<name>_claims.json``.

    ``markdown``: the page's lines (joined with newlines, written atomically). The claims file
    holds ``{**meta, "claims": [verdict dicts]}``; ``meta`` must hold :data:`REPORT_META` (the
    profile, the number of records used and of runs the profile defines), so that a later
    report can tell whether it would replace a fuller one. ``files``: what the study wrote
    already (figures), listed first. ``scores``: numbers a CI regression check compares (higher is
    better), with the ``score_tolerance`` a recorded expectation allows. Returns what a study's
    ``report`` returns: ``{"files": [*files, markdown path, claims path], "claims": [verdict dicts]}``,
    plus ``scores`` and ``score_tolerance`` when given.
    """
    missing = [key for key in REPORT_META if key not in meta]
    if missing:
        raise ValueError(f"write_report({name!r}): meta lacks {', '.join(missing)} (see claims.REPORT_META)")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    md_path = out_dir / f"{name}.md"
    atomic_write_bytes(md_path, "\n".join(markdown).encode())
    claims_path = out_dir / f"{name}_claims.json"
    claim_dicts = [v.to_dict() for v in verdicts]
    write_json(claims_path, {**meta, "claims": claim_dicts})
    out = {"files": [*files, md_path, claims_path], "claims": claim_dicts}
    if scores:
        out.update(scores=scores, score_tolerance=score_tolerance)
    return out


def replacement_refusal(out_dir, name: str, *, profile: str, records: int, runs: int, omits=()) -> str | None:
    """Why a report of ``profile`` from ``records`` of its ``runs`` must not replace ``<out_dir>/<name>``'s, or None.

    A report is made from whatever records exist, so without this a preview (another profile,
    or a study still running) would silently overwrite a committed full report. The existing
    report is described by its claims file and by its metrics file (:mod:`replication.outcomes`),
    which both state :data:`REPORT_META`; each one that can be read is checked. Refused: a report
    of another profile than the existing one's, or a partial one (fewer records than its
    profile's runs) made from fewer records than the existing one. A description without counts
    (written before they were recorded) counts as complete. Replacing a report made from no
    record loses nothing. Refused too: a report that ``omits`` a part the existing one has (a
    claims file lists what its report omits under ``"omits"``; e.g. the BBOB report's cocopp
    pages, which a report from a run table lacks). And refused where what the existing report was
    made from is unknown: a description that cannot be read or states no profile and counts
    (garbled), or a report (its page or run table) whose descriptions are both gone; one damaged
    or deleted file must not turn the guard off.
    """
    out_dir = Path(out_dir)
    new = f"profile {profile!r}, {records} of {runs} runs"
    described = []
    for path in (out_dir / f"{name}_claims.json", out_dir / f"{name}_metrics.json"):
        try:
            old = read_json(path)
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as exc:  # ValueError: not JSON, not UTF-8
            why = "not JSON" if isinstance(exc, ValueError) else exc.strerror or type(exc).__name__
            return f"{path} cannot be read ({why}), so what its report was made from is unknown ({new})"
        if not _is_description(old):
            return f"{path} does not say what its report was made from (profile, records, runs) ({new})"
        described.append((path, old))
    if not described:
        present = [p for p in (out_dir / f"{name}.md", out_dir / f"{name}_runs.parquet") if p.exists()]
        if present:
            return (f"{present[0]} is a report whose claims and metrics files are gone, so what it was made from is "
                    f"unknown ({new})")
        return None
    for path, old in described:
        reason = _replaces_less(path, old, profile=profile, records=records, runs=runs, omits=omits, new=new)
        if reason is not None:
            return reason
    return None


def _is_description(old) -> bool:
    """Whether ``old`` states a report's :data:`REPORT_META` (counts may be absent: written before they were kept)."""
    def count(value):
        return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)
    return isinstance(old, dict) and isinstance(old.get("profile"), str) and isinstance(old.get("omits", []), list) \
        and count(old.get("records")) and count(old.get("runs"))


def _replaces_less(path: Path, old: dict, *, profile, records, runs, omits, new) -> str | None:
    """:func:`replacement_refusal`'s verdict against one description ``old`` (read from ``path``)."""
    if old.get("records") == 0:
        return None
    old_profile, old_records, old_runs = old.get("profile"), old.get("records"), old.get("runs")
    had = f"profile {old_profile!r}" + ("" if old_records is None else f", {old_records} of {old_runs} runs")
    if old_profile != profile:
        return f"{path} is a report of another profile ({had}; this one: {new})"
    if records < runs and (old_records is None or records < old_records):
        return f"{path} was made from more records ({had}; this one: {new})"
    lost = [part for part in omits if part not in (old.get("omits") or [])]
    if lost and path.name.endswith("_claims.json"):  # the claims file lists what its report omits
        return f"{path} belongs to a report with {', '.join(lost)}, which this one would lack"
    return None
