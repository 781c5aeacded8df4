"""Image study objective: batched cross-entropy, the mini-batch objective, accuracy, the problem."""
import pickle

import numpy as np
import pytest

import sabo
from replication.image import objective as image_objective
from replication.image.data import Dataset
from replication.image.features import Embedding
from replication.image.objective import MiniBatchObjective, accuracy, population_losses, predict
from replication.image.problem import ImageProblem


def _loop_losses(W, phi, y, K):
    """Reference: one candidate at a time, one example at a time, with scipy's logsumexp."""
    from scipy.special import logsumexp

    out = []
    for w in W:
        Wm = w.reshape(K, -1)
        out.append(np.mean([logsumexp(Wm @ p) - (Wm @ p)[label] for p, label in zip(phi, y)]))
    return np.array(out)


def _data(m=200, d_tilde=6, K=10, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, d_tilde)) * 3, rng.integers(0, K, m)


@pytest.mark.parametrize("K, d_tilde, n", [(10, 6, 7), (3, 1, 1), (10, 10, 25)])
def test_population_losses_equal_a_loop(K, d_tilde, n):
    phi, y = _data(150, d_tilde, K)
    W = np.random.default_rng(1).standard_normal((n, K * d_tilde)) * 2
    np.testing.assert_allclose(population_losses(W, phi, y, n_classes=K), _loop_losses(W, phi, y, K),
                               rtol=0, atol=1e-10)


def test_population_losses_chunked_equals_unchunked(monkeypatch):
    phi, y = _data(97)
    W = np.random.default_rng(2).standard_normal((5, 60))
    full = population_losses(W, phi, y)
    monkeypatch.setattr(image_objective, "MAX_LOGITS", 130)  # 2 rows per chunk for 5 x 10 logits
    np.testing.assert_allclose(population_losses(W, phi, y), full, rtol=0, atol=1e-12)


def test_cross_entropy_by_hand():
    # K = 3, d~ = 2, W = [[1, 0], [0, 1], [0, 0]]: logits (1, 0, 0) for phi = (1, 0), (0, 1, 0) for (0, 1)
    W = np.array([[1.0, 0.0, 0.0, 1.0, 0.0, 0.0]])
    phi = np.array([[1.0, 0.0], [0.0, 1.0]])
    y = np.array([0, 2])
    expected = 0.5 * ((np.log(np.e + 2) - 1.0) + (np.log(np.e + 2) - 0.0))
    assert population_losses(W, phi, y, n_classes=3)[0] == pytest.approx(expected, abs=1e-15)
    # W = 0: uniform prediction, loss log K
    assert population_losses(np.zeros((1, 20)), _data(5, 2)[0], np.arange(5), n_classes=10)[0] == \
        pytest.approx(np.log(10), abs=1e-15)


def test_cross_entropy_is_stable_for_huge_logits():
    W = np.array([[1e4, 0.0, 0.0, 0.0]])  # K = 2, d~ = 2: logits (1e4 phi_0, 0)
    phi = np.array([[1.0, 0.0], [-1.0, 0.0]])
    losses = population_losses(W, phi, np.array([1, 1]), n_classes=2)
    assert losses[0] == pytest.approx(0.5 * 1e4, rel=1e-12)  # log(e^{1e4} + 1) - 0 = 1e4; second ~ 0


@pytest.mark.parametrize("K, k, d_tilde, n", [(10, 8, 100, 7), (3, 2, 1, 1), (10, 8, 5, 30)])
def test_the_folded_projection_equals_the_projected_features(K, k, d_tilde, n):
    """logits u (P W^T) are (u P) W^T: the folded objective, predictions and accuracy agree with the
    unfolded ones (and the loop reference) up to rounding."""
    rng = np.random.default_rng(3)
    u, y = rng.standard_normal((120, k)) * 3, rng.integers(0, K, 120)
    P = rng.standard_normal((k, d_tilde)) / np.sqrt(k)
    W = rng.standard_normal((n, K * d_tilde))
    folded = population_losses(W, u, y, n_classes=K, projection=P)
    np.testing.assert_allclose(folded, population_losses(W, u @ P, y, n_classes=K), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(folded, _loop_losses(W, u @ P, y, K), rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(predict(W[0], u, n_classes=K, projection=P), predict(W[0], u @ P, n_classes=K))
    objective = MiniBatchObjective(u, y, batch_size=50, seed=0, n_classes=K, projection=P)
    assert objective.dim == K * d_tilde and objective.d_tilde == d_tilde
    with pytest.raises(ValueError, match=rf"projection must have shape \({k}, d~\)"):
        population_losses(W, u, y, n_classes=K, projection=P.T)
    with pytest.raises(ValueError, match=r"W must have shape \(n, " + str(K * d_tilde) + r"\)"):
        population_losses(W[:, :-1], u, y, n_classes=K, projection=P)


def test_raising_tiny_exponentials_to_the_floor_changes_no_bit(monkeypatch):
    """The shifted logits below EXP_FLOOR are raised to it before exp (no underflow into denormals or 0):
    the sum accumulates from 1 upwards, so terms below 2^-53 vanish whatever their value and every loss is
    bit for bit the unclipped one, on logits of a diverged run (weights ~1e3: most terms underflow)."""
    rng = np.random.default_rng(4)
    u, y = rng.standard_normal((300, 8)), rng.integers(0, 10, 300)
    P = rng.standard_normal((8, 20))
    for scale in (0.5, 30.0, 1e3, 1e6):
        W = rng.standard_normal((40, 200)) * scale
        clipped = population_losses(W, u, y, projection=P)
        monkeypatch.setattr(image_objective, "EXP_FLOOR", -np.inf)
        np.testing.assert_array_equal(population_losses(W, u, y, projection=P), clipped)
        monkeypatch.setattr(image_objective, "EXP_FLOOR", -64.0)
    assert np.exp(image_objective.EXP_FLOOR) < 2.0**-53


def test_the_sum_from_one_upwards_is_what_makes_the_floor_exact(monkeypatch):
    """A case where summing in plain class order would change with the floor: e^{s_0} (clipped or not) plus
    e^{s_1} lands on either side of 2^-53, half a unit of 1, and 1 + that rounds differently. Summed from 1
    upwards, the clipped and unclipped sums are the same."""
    e1 = 2.0**-53 - 1e-29  # between 2^-53 - e^-64 and 2^-53 - e^-70
    s = np.array([-70.0, np.log(e1), 0.0])[:, None, None]  # (K = 3, 1 row, 1 candidate), max 0

    def plain(shifted, floor):
        return np.exp(np.maximum(shifted, floor)).sum(axis=0)

    assert plain(s, -64.0) != plain(s, -np.inf)  # the plain order is not exact under the floor
    clipped = image_objective.log_sum_exp_shifted(s.copy())
    monkeypatch.setattr(image_objective, "EXP_FLOOR", -np.inf)
    assert image_objective.log_sum_exp_shifted(s.copy()) == clipped
    np.testing.assert_allclose(clipped, np.log(np.exp(s).sum(axis=0)), rtol=0, atol=1e-15)


def test_the_floor_as_an_array_gives_the_scalar_floors_bits():
    """mean_cross_entropy raises the shifted logits to EXP_FLOOR held in an array (faster than the scalar):
    the same bits as the scalar floor, NaN and infinities included, in both precisions."""
    rng = np.random.default_rng(5)
    for dtype in (np.float64, np.float32):
        s = (rng.standard_normal((10, 7, 5)) * 40).astype(dtype)
        s -= s.max(axis=0)
        s[3, 2, 1], s[0, 4, 4], s[5, 1, 0] = np.nan, -np.inf, -1e30
        floor = np.full(s.shape, image_objective.EXP_FLOOR, dtype)
        np.testing.assert_array_equal(image_objective.log_sum_exp_shifted(s.copy(), floor),
                                      image_objective.log_sum_exp_shifted(s.copy()))
        assert np.isnan(image_objective.log_sum_exp_shifted(s.copy(), floor)[2, 1])


def test_population_losses_validate():
    phi, y = _data(10)
    with pytest.raises(ValueError, match=r"W must have shape \(n, 60\)"):
        population_losses(np.zeros((2, 59)), phi, y)
    with pytest.raises(ValueError, match=r"W must have shape"):
        population_losses(np.zeros(60), phi, y)
    with pytest.raises(ValueError, match="labels must lie in 0..9"):
        population_losses(np.zeros((1, 60)), phi, y + 10)
    with pytest.raises(ValueError, match="one per row of features"):
        population_losses(np.zeros((1, 60)), phi, y[:5])
    with pytest.raises(ValueError, match="features must be finite"):
        population_losses(np.zeros((1, 60)), phi * np.nan, y)


# -- mini-batch objective ---------------------------------------------------------------------
def test_one_batch_per_call_shared_by_all_rows(monkeypatch):
    phi, y = _data(500)
    obj = MiniBatchObjective(phi, y, batch_size=64, seed=0)
    drawn = []
    real = obj.sample_batch

    def spy():
        batch = real()
        drawn.append(batch)
        return batch

    monkeypatch.setattr(obj, "sample_batch", spy)
    X = np.random.default_rng(3).standard_normal((6, 60))
    X[4] = X[1]
    for call in range(3):
        v = obj(X)
        assert len(drawn) == call + 1 and obj.n_calls == call + 1  # exactly one batch per call
        batch = drawn[-1]
        assert np.array_equal(batch, obj.last_batch)
        assert batch.size == 64 and np.unique(batch).size == 64  # without replacement
        assert v[4] == v[1]  # identical rows, identical values: the same batch for every row
        np.testing.assert_allclose(v, population_losses(X, phi[batch], y[batch]), rtol=0, atol=1e-12)
    assert not np.array_equal(drawn[0], drawn[1])  # a fresh batch per call


def test_state_restore_reproduces_the_next_batches():
    phi, y = _data(300)
    obj = MiniBatchObjective(phi, y, batch_size=32, seed=7)
    X = np.random.default_rng(4).standard_normal((3, 60))
    obj(X)
    state = pickle.loads(pickle.dumps(obj.get_state()))  # checkpoints pickle it
    ahead = [(obj(X), obj.last_batch.copy()) for _ in range(4)]
    fresh = MiniBatchObjective(phi, y, batch_size=32, seed=123)
    fresh.set_state(state)
    assert fresh.n_calls == 1
    for v, batch in ahead:
        np.testing.assert_array_equal(fresh(X), v)
        np.testing.assert_array_equal(fresh.last_batch, batch)
    assert fresh.n_calls == obj.n_calls == 5
    # the same seed gives the same batches; another seed others
    a, b = MiniBatchObjective(phi, y, 32, seed=7), MiniBatchObjective(phi, y, 32, seed=8)
    a(X), b(X)
    assert not np.array_equal(a.last_batch, b.last_batch)
    with pytest.raises(ValueError, match="get_state"):
        fresh.set_state({"state": 1})


def test_batch_size_cap_and_rejected_calls_do_not_advance():
    phi, y = _data(50)
    obj = MiniBatchObjective(phi, y, batch_size=2048, seed=0)
    assert obj.batch_size_requested == 2048 and obj.batch_size == 50 and obj.full_batch
    X = np.random.default_rng(5).standard_normal((2, 60))
    np.testing.assert_allclose(obj(X), population_losses(X, phi, y), rtol=0, atol=1e-12)
    assert np.array_equal(obj.last_batch, np.arange(50))
    np.testing.assert_allclose(obj.full_loss(X), population_losses(X, phi, y), rtol=0, atol=1e-12)
    small = MiniBatchObjective(phi, y, batch_size=10, seed=0)
    state = small.get_state()
    with pytest.raises(ValueError, match=r"X must have shape \(n, 60\)"):
        small(np.zeros((2, 61)))
    assert small.n_calls == 0 and small.get_state() == state
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1"):
        MiniBatchObjective(phi, y, batch_size=0)


# -- accuracy ---------------------------------------------------------------------------------
def test_accuracy_on_a_separable_example():
    # three classes on the axes of R^3, W = identity: every example classified correctly
    phi = np.vstack([np.eye(3) * s for s in (1.0, 2.0, 0.5)])
    y = np.tile([0, 1, 2], 3)
    w = np.eye(3).ravel()
    assert accuracy(w, phi, y, n_classes=3) == 1.0
    np.testing.assert_array_equal(predict(w, phi, n_classes=3), y)
    assert accuracy(-w, phi, y, n_classes=3) == 0.0
    with pytest.raises(ValueError, match=r"w must have shape \(9,\)"):
        accuracy(w[:-1], phi, y, n_classes=3)


# -- the assembled problem --------------------------------------------------------------------
def _problem(rate=0.4, batch_size=16):
    rng = np.random.default_rng(0)
    x = rng.random((120, 16))
    y = np.arange(120) % 10
    ds = Dataset(x, y, x[:40], y[:40], name="tiny")
    emb = Embedding(train=(x[:, :8] * 4).astype(np.float32), test=(x[:40, :8] * 4).astype(np.float32),
                    key="k", path=None, from_cache=False, fit_seconds=0.0)
    return ImageProblem.from_dataset(ds, d_tilde=5, noise_rate=rate, noise_seed=1, projection_seed=2,
                                     batch_size=batch_size, batch_seed=3, embedding=emb)


def test_image_problem_metrics_do_not_touch_the_sampler_and_resume_is_identical():
    problem = _problem()
    assert problem.dim == 50 and np.array_equal(problem.x0, np.zeros(50))
    assert problem.info["noise_rate"] == 0.4 and 0 < problem.info["flipped"] < 120
    m = problem.metrics(problem.x0)
    assert set(m) == {"test_accuracy", "test_loss", "train_loss"}
    assert m["test_loss"] == pytest.approx(np.log(10)) and m["train_loss"] == pytest.approx(np.log(10))

    opt = sabo.SABO(problem.x0, sigma0=0.5**0.5, popsize=8, lr=0.1, rho=1.0, seed=0)
    for _ in range(6):
        X = opt.ask()
        opt.tell(X, problem.objective(X))
    saved = pickle.dumps({"opt": opt.state_dict(), "problem": problem.get_state()})
    trace = []
    for _ in range(6):
        X = opt.ask()
        problem.metrics(opt.mean)  # metrics in between must not change what follows
        v = problem.objective(X)
        opt.tell(X, v)
        trace.append(v)

    state = pickle.loads(saved)
    opt2 = sabo.SABO.from_state_dict(state["opt"])
    problem2 = _problem()
    problem2.set_state(state["problem"])
    for v in trace:
        X = opt2.ask()
        v2 = problem2.objective(X)
        np.testing.assert_array_equal(v2, v)
        opt2.tell(X, v2)
    np.testing.assert_array_equal(opt2.mean, opt.mean)


@pytest.mark.parametrize("scale", [0.3, 30.0])  # weights of a learning run, and of one far out (large logits)
def test_float32_losses_are_the_float64_ones_to_single_precision(scale):
    """dtype="float32" (Fashion-MNIST's runs): float64 means within a few float32 roundings of the float64
    losses, and the same order of the candidates -- what SABO's and every ranking method's update reads."""
    rng = np.random.default_rng(4)
    u, y = rng.standard_normal((2048, 8)), rng.integers(0, 10, 2048)
    P = rng.standard_normal((8, 100)) / np.sqrt(8)
    W = rng.standard_normal((100, 1000)) * scale / 10
    exact = population_losses(W, u, y, projection=P)
    single = population_losses(W, u, y, projection=P, dtype="float32")
    assert single.dtype == np.float64
    np.testing.assert_allclose(single, exact, rtol=1e-6)
    assert not np.array_equal(single, exact)  # the float32 path really is another computation
    np.testing.assert_array_equal(np.argsort(single, kind="stable"), np.argsort(exact, kind="stable"))


def test_float32_objective_keeps_float64_metrics_and_refuses_other_dtypes():
    phi, y = _data(300)
    W = np.random.default_rng(5).standard_normal((4, 60))
    single = MiniBatchObjective(phi, y, batch_size=300, seed=0, dtype="float32")
    exact = MiniBatchObjective(phi, y, batch_size=300, seed=0)
    np.testing.assert_array_equal(single.full_loss(W), exact.full_loss(W))
    np.testing.assert_allclose(single(W), exact(W), rtol=1e-6)
    with pytest.raises(ValueError, match="dtype must be one of float64, float32 .got 'float16'"):
        MiniBatchObjective(phi, y, dtype="float16")
    with pytest.raises(ValueError, match="dtype must be one of"):
        population_losses(W, phi, y, dtype=np.float32)
