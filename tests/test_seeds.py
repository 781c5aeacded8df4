"""Results over seeds as the reports print them (replication.seeds)."""
import numpy as np
import pytest

from replication.seeds import over_seeds, seeds_text


def test_mean_and_sample_std_of_the_finished_seeds():
    s = over_seeds([70.0, 72.0, 77.0], diverged=1)
    assert s["mean"] == pytest.approx(73.0) and s["std"] == pytest.approx(np.std([70, 72, 77], ddof=1))
    assert (s["seeds"], s["diverged"]) == (4, 1)
    assert seeds_text(s) == "73.00 ± 3.61 (1/4 seeds diverged)"
    assert seeds_text(over_seeds([70.0, 72.0], 0), bold=True) == "**71.00 ± 1.41**"


def test_one_seed_has_no_std_and_says_so():
    one = over_seeds([70.0], diverged=0)
    assert np.isnan(one["std"]) and seeds_text(one) == "70.00 (1 seed)"
    assert seeds_text(over_seeds([70.0], diverged=2), bold=True) == "**70.00** (1 seed; 2/3 seeds diverged)"


def test_every_seed_diverged():
    gone = over_seeds([], diverged=3)
    assert np.isnan(gone["mean"]) and seeds_text(gone) == "diverged (3/3 seeds)"
