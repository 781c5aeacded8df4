"""Image study features: cached UMAP embedding, the fixed projection P, phi = u P."""
import json
from pathlib import Path

import numpy as np
import pytest

from replication.image import features
from replication.image.data import Dataset, load_digits_stand_in
from replication.image.features import embedding_key, project, projection, umap_embedding


@pytest.fixture(scope="module")
def small_digits():
    """A 300/60 subset of the stand-in: real UMAP on it costs little beyond numba's compilation."""
    ds = load_digits_stand_in()
    return Dataset(ds.train_x[:300], ds.train_y[:300], ds.test_x[:60], ds.test_y[:60], name="digits-subset",
                   is_stand_in=True, image_shape=(8, 8))


@pytest.fixture
def fit_counter(monkeypatch):
    calls = []
    real = features._fit_umap

    def counting(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(features, "_fit_umap", counting)
    return calls


def test_umap_embedding_real_fit_then_cache_hit(small_digits, tmp_path, fit_counter):
    pytest.importorskip("umap")
    first = umap_embedding(small_digits, n_components=8, seed=0, cache_dir=tmp_path)
    assert len(fit_counter) == 1 and not first.from_cache
    assert first.train.shape == (300, 8) and first.test.shape == (60, 8)
    assert first.train.dtype == np.float32 and np.all(np.isfinite(first.train)) and np.all(np.isfinite(first.test))
    assert first.path.parent == tmp_path and first.path.name == f"umap-{first.key}.npz"
    assert [p.name for p in tmp_path.iterdir()] == [first.path.name]  # atomic write: no temporary left over

    second = umap_embedding(small_digits, n_components=8, seed=0, cache_dir=tmp_path)
    assert len(fit_counter) == 1 and second.from_cache  # no refit
    np.testing.assert_array_equal(second.train, first.train)
    np.testing.assert_array_equal(second.test, first.test)
    assert second.key == first.key and second.fit_seconds == pytest.approx(first.fit_seconds)

    other = umap_embedding(small_digits, n_components=8, seed=1, cache_dir=tmp_path)
    assert len(fit_counter) == 2 and not other.from_cache and other.key != first.key
    assert not np.array_equal(other.train, first.train)

    # the fit is deterministic given the seed: a refit without the cache reproduces the file
    again = umap_embedding(small_digits, n_components=8, seed=0, cache=False)
    assert len(fit_counter) == 3 and again.path is None
    np.testing.assert_array_equal(again.train, first.train)
    np.testing.assert_array_equal(again.test, first.test)


def _fake_fit(train_x, test_x, *, n_components, seed, n_neighbors, min_dist):
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((train_x.shape[1], n_components)).astype(np.float32)
    return train_x @ M, test_x @ M


@pytest.fixture
def fake_fit(monkeypatch):
    calls = []

    def fit(*args, **kwargs):
        calls.append(kwargs)
        return _fake_fit(*args, **kwargs)

    monkeypatch.setattr(features, "_fit_umap", fit)
    return calls


def _tiny(name="tiny", labels_offset=0, scale=1.0):
    rng = np.random.default_rng(0)
    x = rng.random((40, 16)) * scale
    y = (np.arange(40) + labels_offset) % 10
    return Dataset(x, y, x[:10], y[:10], name=name)


def test_cache_key_covers_images_parameters_and_software_but_not_labels(fake_fit, tmp_path, monkeypatch):
    base = dict(n_components=4, seed=0, n_neighbors=15, min_dist=0.1)
    k0, fields = embedding_key(_tiny(), **base)
    assert fields["dataset"] == "tiny" and fields["software"]["numba_target"] == "generic"
    assert set(features.SOFTWARE) <= set(fields["software"])
    assert embedding_key(_tiny(labels_offset=3), **base)[0] == k0  # noisy labels share the embedding
    assert embedding_key(_tiny(name="other"), **base)[0] != k0
    assert embedding_key(_tiny(scale=0.5), **base)[0] != k0
    for change in ({"n_components": 5}, {"seed": 1}, {"n_neighbors": 10}, {"min_dist": 0.2}):
        assert embedding_key(_tiny(), **{**base, **change})[0] != k0
    for dist in ("umap-learn", "numba"):  # a new release of what computes it: another key
        real = features._version
        monkeypatch.setattr(features, "_version", lambda d, dist=dist, real=real: "9.test" if d == dist else real(d))
        assert embedding_key(_tiny(), **base)[0] != k0
        monkeypatch.setattr(features, "_version", real)


def test_cache_hit_miss_and_damaged_file(fake_fit, tmp_path):
    ds = _tiny()
    a = umap_embedding(ds, n_components=4, seed=0, cache_dir=tmp_path)
    b = umap_embedding(ds, n_components=4, seed=0, cache_dir=tmp_path)
    assert len(fake_fit) == 1 and b.from_cache and np.array_equal(a.train, b.train)
    umap_embedding(ds, n_components=4, seed=2, cache_dir=tmp_path)
    assert len(fake_fit) == 2
    a.path.write_bytes(b"not an npz")
    with pytest.warns(RuntimeWarning, match="unreadable UMAP embedding file"):
        c = umap_embedding(ds, n_components=4, seed=0, cache_dir=tmp_path)
    assert len(fake_fit) == 3 and not c.from_cache and np.array_equal(c.train, a.train)
    assert umap_embedding(ds, n_components=4, seed=0, cache_dir=tmp_path).from_cache  # rewritten


def test_default_cache_dir_env(monkeypatch, tmp_path):
    monkeypatch.setenv("SABO_BENCH_CACHE", str(tmp_path))
    assert features.default_cache_dir() == tmp_path / "umap"


def test_umap_embedding_validates(fake_fit, tmp_path):
    ds = _tiny()
    with pytest.raises(ValueError, match="n_components must be an integer >= 1"):
        umap_embedding(ds, n_components=0, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="n_components must be below the number of features 16"):
        umap_embedding(ds, n_components=16, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="seed must be an integer >= 0"):
        umap_embedding(ds, seed=-1, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="min_dist"):
        umap_embedding(ds, min_dist=-1.0, cache_dir=tmp_path)
    assert not fake_fit


def test_projection_fixed_and_scaled():
    P = projection(100, seed=0)
    assert P.shape == (8, 100) and P.dtype == np.float64
    np.testing.assert_array_equal(P, projection(100, seed=0))
    assert not np.array_equal(P, projection(100, seed=1))
    big = projection(20_000, seed=0)
    assert big.var() == pytest.approx(1 / 8, rel=0.02) and abs(big.mean()) < 0.01  # N(0, 1/8)
    assert projection(10, seed=0, n_components=4).shape == (4, 10)
    with pytest.raises(ValueError, match="d_tilde must be an integer >= 1"):
        projection(0, seed=0)


def test_project_is_u_times_P():
    u = np.arange(6, dtype=np.float32).reshape(2, 3)
    P = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    np.testing.assert_array_equal(project(u, P), [[2.0, 3.0], [8.0, 9.0]])
    assert project(u, P).dtype == np.float64
    with pytest.raises(ValueError, match="same k"):
        project(u, P.T)


def test_fit_runs_in_a_child_compiled_for_numbas_portable_target(small_digits, monkeypatch):
    """numba compiles UMAP for the host CPU unless told otherwise, and the embedding then depends on the
    CPU (replication.image.umap_fit): the child must compile for 'generic' whatever the parent's
    environment says, with one thread per pool."""
    pytest.importorskip("umap")
    from replication.image import umap_fit

    monkeypatch.setenv("NUMBA_CPU_NAME", "host")
    monkeypatch.setenv("NUMBA_CPU_FEATURES", "+avx2")
    env = umap_fit.child_env()
    assert env["NUMBA_CPU_NAME"] == "generic" and "NUMBA_CPU_FEATURES" not in env
    assert env["OPENBLAS_NUM_THREADS"] == env["NUMBA_NUM_THREADS"] == "1"
    seen = {}
    real_run = __import__("subprocess").run

    def spy(cmd, **kwargs):
        done = real_run(cmd, **kwargs)
        with np.load(f"{cmd[-2]}/embedding.npz", allow_pickle=False) as npz:
            seen.update(json.loads(str(npz["target"])))
        return done

    monkeypatch.setattr("subprocess.run", spy)
    ds = Dataset(small_digits.train_x[:120], small_digits.train_y[:120], small_digits.test_x[:20],
                 small_digits.test_y[:20], name="digits-tiny")
    emb = umap_embedding(ds, n_components=2, seed=0, cache=False)
    assert seen == {"cpu_name": "generic", "cpu_features": ""}  # what numba read in the child
    assert emb.source == "fit" and emb.sha256 == features.embedding_sha256(emb.train, emb.test)


def test_child_failure_is_one_line(monkeypatch, small_digits):
    pytest.importorskip("umap")
    monkeypatch.setattr("replication.image.umap_fit.PORTABLE_ENV",
                        {"NUMBA_CPU_NAME": "generic", "PYTHONPATH": "/nonexistent"})
    monkeypatch.setattr("sys.executable", "/bin/false")
    with pytest.raises(RuntimeError, match=r"^the UMAP fit failed in its child process: exit status 1$"):
        features._fit_umap(small_digits.train_x, small_digits.test_x, n_components=2, seed=0, n_neighbors=15,
                           min_dist=0.1)


def test_pinned_embedding_is_read_from_the_shipped_file_and_verified(fake_fit, tmp_path):
    ds = _tiny()
    fitted = umap_embedding(ds, n_components=4, seed=0, cache=False)
    shipped = tmp_path / "shipped"
    path = shipped / f"tiny-umap4-seed0-{fitted.sha256[:16]}.npz"
    features.write_embedding(path, fitted, features.embedding_inputs(ds, n_components=4, seed=0, n_neighbors=15,
                                                                      min_dist=0.1))
    hit = umap_embedding(ds, n_components=4, seed=0, cache_dir=tmp_path / "cache", expected_sha256=fitted.sha256,
                         shipped_dir=shipped)
    assert len(fake_fit) == 1 and hit.source == "shipped" and hit.from_cache and hit.path == path
    np.testing.assert_array_equal(hit.train, fitted.train)
    assert not (tmp_path / "cache").exists()  # nothing computed, nothing cached
    # the same pin for other images (another data set's file under this checksum) is not used
    other = _tiny(scale=0.5)
    with pytest.warns(RuntimeWarning, match="ignoring shipped UMAP embedding"), \
            pytest.raises(features.EmbeddingMismatch, match="pin [0-9a-f]{64} for this data set"):
        umap_embedding(other, n_components=4, seed=0, cache=False, expected_sha256=fitted.sha256,
                       shipped_dir=shipped)
    # a shipped file whose contents were altered is not trusted
    data = dict(np.load(path, allow_pickle=False))
    data["train"] = data["train"] + np.float32(1)
    np.savez(path, **data)
    with pytest.warns(RuntimeWarning, match="contents or inputs do not match"):
        again = umap_embedding(ds, n_components=4, seed=0, cache=False, expected_sha256=fitted.sha256,
                               shipped_dir=shipped)
    assert again.source == "fit" and again.sha256 == fitted.sha256  # recomputed, and it matches the pin


def test_a_computed_embedding_other_than_the_pin_is_refused_with_what_to_do(fake_fit, tmp_path):
    from replication.errors import ResourceUnavailable

    with pytest.raises(features.EmbeddingMismatch) as info:
        umap_embedding(_tiny(), n_components=4, seed=0, cache_dir=tmp_path, expected_sha256="0" * 64,
                       shipped_dir=tmp_path / "none")
    message = str(info.value)
    assert isinstance(info.value, ResourceUnavailable) and "\n" not in message
    assert "pinned by image.umap.sha256 (0000000000000000...)" in message and "numba" in message
    with pytest.raises(ValueError, match="expected_sha256 must be 64 lower-case hex digits"):
        umap_embedding(_tiny(), n_components=4, expected_sha256="ABC", cache=False)


def test_the_shipped_stand_in_embedding_is_the_one_params_yaml_pins():
    """The file is found by its pin, reads back to its checksum, and was computed from the stand-in's images
    with the parameters params.yaml gives (what `sabo-bench prepare image --refit --ship` wrote)."""
    import yaml

    from replication.image.data import load_digits_stand_in

    params = yaml.safe_load((Path(__file__).resolve().parents[1] / "params.yaml").read_text())["image"]
    pin = params["umap"]["sha256"]["digits_stand_in"]
    emb = umap_embedding(load_digits_stand_in(), n_components=params["umap"]["n_components"],
                         seed=params["umap"]["seed"], cache=False, expected_sha256=pin)
    assert emb.source == "shipped" and emb.sha256 == pin
    assert emb.params["software"]["numba_target"] == "generic"
