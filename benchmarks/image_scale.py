"""Cost of the noisy-label study's objective at Fashion-MNIST scale, without the data.

    python benchmarks/image_scale.py [--reps 15] [--umap]

1. One population loss (N = 100 candidates on a mini-batch of M = 2048, K = 10 classes) at
   d~ = 10 and 100 (d = 100, 1000), on random embeddings of the real shape (8 coordinates), in
   five forms, measured interleaved in one process with one BLAS thread: the features
   projected first, phi = u P (what the study computed before), or P folded into the weights,
   u (P W^T) (what it computes now); each with the exponential of every shifted logit, or with
   those below ``EXP_FLOOR`` raised to it first (exact: replication/image/objective.py); and the
   folded, floored form in float32 (``image.dtype``, Fashion-MNIST's runs). Two
   kinds of weights: those of a run that learns (N(0, 1/d~)), and those of a diverged run (x 1e4,
   where most exponentials underflow). Prints milliseconds per evaluation of the population and
   the ratios against the first form.
2. With --umap: the UMAP fit (8 components) on 60,000 x 784 random data, an estimate of the
   data-preparation cost (numba compilation included, as in a fresh process).
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

from replication.image import objective
from replication.image.features import project, projection

FORMS = {"projected, every exp": (False, -np.inf, "float64"),
         "projected, floored exp": (False, objective.EXP_FLOOR, "float64"),
         "folded, every exp": (True, -np.inf, "float64"),
         "folded, floored exp (float64)": (True, objective.EXP_FLOOR, "float64"),
         "folded, floored exp, float32": (True, objective.EXP_FLOOR, "float32")}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=15, help="interleaved rounds; the median is shown")
    ap.add_argument("--umap", action="store_true")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    u = rng.normal(size=(2048, 8))
    y = rng.integers(0, 10, 2048)
    with threadpool_limits(1):
        for d_tilde in (10, 100):
            P = projection(d_tilde, 0)
            phi = project(u, P)
            for kind, scale in (("learning", 1.0), ("diverged", 1e4)):
                W = rng.normal(size=(100, 10 * d_tilde)) * scale / np.sqrt(d_tilde)
                times = {name: [] for name in FORMS}
                for _ in range(args.reps):
                    for name, (folded, floor, dtype) in FORMS.items():
                        objective.EXP_FLOOR = floor
                        t0 = time.perf_counter()
                        if folded:
                            objective.population_losses(W, u, y, projection=P, dtype=dtype)
                        else:
                            objective.population_losses(W, phi, y, dtype=dtype)
                        times[name].append(time.perf_counter() - t0)
                objective.EXP_FLOOR = FORMS["folded, floored exp (float64)"][1]
                base = np.median(times[next(iter(FORMS))])
                row = ", ".join(f"{name} {np.median(t) * 1e3:.2f} ms ({base / np.median(t):.2f}x)"
                                for name, t in times.items())
                print(f"d~ = {d_tilde:3d}, {kind} weights: {row}", flush=True)
    if args.umap:
        import umap

        data = rng.random((60_000, 784), dtype=np.float32)
        t0 = time.perf_counter()
        umap.UMAP(n_components=8, random_state=0).fit(data)
        print(f"UMAP fit, 60,000 x 784 random data, 8 components: {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
