"""The COCO suites the study runs: their function ids, dimensions and standard instances.

Written out rather than read from ``cocoex`` so that ``params.yaml`` can be validated without it
(``tests/test_bbob.py`` checks every entry against ``cocoex``).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Suite:
    functions: list[int]
    dims: list[int]
    instances: list[int]   # cocoex's default instances (coco-experiment 2.8: bbob's of year 2023 on)
    noisy: bool = False


SUITES = {
    "bbob": Suite(list(range(1, 25)), [2, 3, 5, 10, 20, 40], [1, 2, 3, 4, 5, *range(71, 81)]),
    "bbob-largescale": Suite(list(range(1, 25)), [20, 40, 80, 160, 320, 640], list(range(1, 16))),
    "bbob-noisy": Suite(list(range(101, 131)), [2, 3, 5, 10, 20, 40], list(range(1, 16)), noisy=True),
}
"""suite name -> its functions, dimensions and standard instances."""
