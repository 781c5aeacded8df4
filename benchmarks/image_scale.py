"""Cost of the noisy-label study at Fashion-MNIST scale, without the data.

    python benchmarks/image_scale.py [--iters 20] [--umap]

1. Time per SABO iteration (two asks, each one batched population loss on a fresh batch)
   at the paper's scale: N = 100, M = 2048, d~ = 100 (d = 1000), on random features of the
   real shape (60,000 training points, 8 UMAP coordinates projected by P).
2. With --umap: the UMAP fit (8 components) on 60,000 x 784 random data, an estimate of the
   data-preparation cost (numba compilation included, as in a fresh process).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from replication.image.features import project, projection
from replication.image.objective import MiniBatchObjective
from sabo import SABO


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--umap", action="store_true")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    u = rng.normal(size=(60_000, 8))
    phi = project(u, projection(100, 0))
    y = rng.integers(0, 10, 60_000)
    objective = MiniBatchObjective(phi, y, batch_size=2048, seed=0)
    opt = SABO(np.zeros(objective.dim), sigma0=np.sqrt(0.5), popsize=100, lr=0.1, rho=100.0, seed=0)

    def iteration():
        for _ in range(2):
            X = opt.ask()
            opt.tell(X, objective(X))

    iteration()
    t0 = time.perf_counter()
    for _ in range(args.iters):
        iteration()
    per_iter = (time.perf_counter() - t0) / args.iters
    t0 = time.perf_counter()
    for _ in range(args.iters):
        objective(opt.ask())
    per_loss = (time.perf_counter() - t0) / args.iters
    print(f"SABO iteration at N = 100, M = 2048, d = 1000: {per_iter * 1e3:.1f} ms "
          f"(of which two population losses: {2 * per_loss * 1e3:.1f} ms)")
    if args.umap:
        import umap

        data = rng.random((60_000, 784), dtype=np.float32)
        t0 = time.perf_counter()
        umap.UMAP(n_components=8, random_state=0).fit(data)
        print(f"UMAP fit, 60,000 x 784 random data, 8 components: {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
