"""Image study data layer: IDX files, Fashion-MNIST loading, the digits stand-in, label noise."""
import gzip
import sys
import types

import numpy as np
import pytest

from replication.image.data import (
    FASHION_MNIST_FILES,
    Dataset,
    FashionMNISTUnavailable,
    load_dataset,
    load_digits_stand_in,
    load_fashion_mnist,
    read_idx,
    write_idx,
)
from replication.image.noise import apply_label_noise, symmetric_label_noise


# -- IDX --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64])
@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 5), (0, 4)])
@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_idx_round_trip(tmp_path, dtype, shape, suffix):
    rng = np.random.default_rng(0)
    info = np.iinfo(dtype) if np.issubdtype(dtype, np.integer) else None
    arr = (rng.integers(info.min, info.max, size=shape, endpoint=True).astype(dtype) if info
           else rng.standard_normal(shape).astype(dtype))
    path = tmp_path / f"a.idx{suffix}"
    write_idx(path, arr)
    raw = path.read_bytes()
    assert (raw[:2] == b"\x1f\x8b") == (suffix == ".gz")
    back = read_idx(path)
    assert back.dtype == np.dtype(dtype) and back.dtype.isnative
    assert back.shape == shape
    np.testing.assert_array_equal(back, arr)


def test_idx_header_is_the_mnist_layout(tmp_path):
    arr = np.arange(2 * 28 * 28, dtype=np.uint8).reshape(2, 28, 28)
    write_idx(tmp_path / "x", arr)
    raw = (tmp_path / "x").read_bytes()
    assert raw[:4] == bytes([0, 0, 0x08, 3])  # magic 0x00000803 as in train-images-idx3-ubyte
    assert raw[4:16] == (2).to_bytes(4, "big") + (28).to_bytes(4, "big") + (28).to_bytes(4, "big")
    assert len(raw) == 16 + arr.size
    # big-endian elements for multi-byte types
    write_idx(tmp_path / "y", np.array([1], dtype=np.int32))
    assert (tmp_path / "y").read_bytes()[8:] == (1).to_bytes(4, "big")


def test_idx_gzip_detected_by_content_and_deterministic(tmp_path):
    arr = np.arange(12, dtype=np.int16).reshape(3, 4)
    write_idx(tmp_path / "a.gz", arr)
    write_idx(tmp_path / "b.gz", arr)
    assert (tmp_path / "a.gz").read_bytes() == (tmp_path / "b.gz").read_bytes()  # no timestamp
    (tmp_path / "noext").write_bytes((tmp_path / "a.gz").read_bytes())
    np.testing.assert_array_equal(read_idx(tmp_path / "noext"), arr)


@pytest.mark.parametrize("payload, match", [
    (b"", "shorter than the 4-byte magic"),
    (b"\x00\x00", "shorter than the 4-byte magic"),
    (b"\x01\x00\x08\x01" + b"\x00\x00\x00\x01" + b"\x05", "first two bytes must be zero"),
    (b"\x00\x00\x07\x01" + b"\x00\x00\x00\x01" + b"\x05", "unknown type code 0x07"),
    (b"\x00\x00\x08\x00", "zero dimensions"),
    (b"\x00\x00\x08\x03" + b"\x00\x00\x00\x02", "truncated IDX file: the header"),
    (b"\x00\x00\x08\x01" + b"\x00\x00\x00\x05" + b"\x01\x02", "truncated IDX file: shape \\(5,\\)"),
    (b"\x00\x00\x0C\x01" + b"\x00\x00\x00\x01" + b"\x00\x00\x01", "truncated IDX file"),
    (b"\x00\x00\x08\x01" + b"\x00\x00\x00\x01" + b"\x01\x02", "1 bytes after"),
])
def test_idx_rejects_bad_files(tmp_path, payload, match):
    for name, content in (("f", payload), ("f.gz", gzip.compress(payload, mtime=0))):
        (tmp_path / name).write_bytes(content)
        with pytest.raises(ValueError, match=match):
            read_idx(tmp_path / name)


def test_idx_rejects_truncated_gzip_and_bad_arrays(tmp_path):
    write_idx(tmp_path / "a.gz", np.arange(1000, dtype=np.int32))
    raw = (tmp_path / "a.gz").read_bytes()
    (tmp_path / "cut.gz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match="truncated or corrupt gzip"):
        read_idx(tmp_path / "cut.gz")
    with pytest.raises(ValueError, match="cannot be stored in IDX"):
        write_idx(tmp_path / "b", np.arange(3, dtype=np.int64))
    with pytest.raises(ValueError, match="1 to 255 dimensions"):
        write_idx(tmp_path / "c", np.array(3, dtype=np.uint8))
    with pytest.raises(FileNotFoundError):
        read_idx(tmp_path / "absent")


# -- Fashion-MNIST ----------------------------------------------------------------------------
def _fake_fashion_dir(path, n_train=30, n_test=10, gz=True, seed=0):
    rng = np.random.default_rng(seed)
    arrays = {
        "train_images": rng.integers(0, 256, size=(n_train, 28, 28), dtype=np.uint8),
        "train_labels": (np.arange(n_train) % 10).astype(np.uint8),
        "test_images": rng.integers(0, 256, size=(n_test, 28, 28), dtype=np.uint8),
        "test_labels": (np.arange(n_test)[::-1] % 10).astype(np.uint8),
    }
    arrays["train_images"][0, 0, 0], arrays["train_images"][0, 0, 1] = 0, 255  # both ends of the scale
    for i, (key, stem) in enumerate(FASHION_MNIST_FILES.items()):
        use_gz = gz if isinstance(gz, bool) else gz[i]
        write_idx(path / (stem + (".gz" if use_gz else "")), arrays[key])
    return arrays


@pytest.mark.parametrize("gz", [True, False, (True, False, False, True)])
def test_load_fashion_mnist_from_directory(tmp_path, gz):
    arrays = _fake_fashion_dir(tmp_path, gz=gz)
    ds = load_fashion_mnist(tmp_path, hub=False, check_sizes=False)
    assert isinstance(ds, Dataset) and not ds.is_stand_in and ds.name == "Fashion-MNIST"
    assert ds.train_x.shape == (30, 784) and ds.test_x.shape == (10, 784)
    assert ds.train_x.dtype == np.float32 and ds.train_y.dtype == np.int64
    assert ds.train_x.min() == 0.0 and ds.train_x.max() == 1.0
    np.testing.assert_allclose(ds.train_x * 255, arrays["train_images"].reshape(30, 784), atol=1e-4)
    np.testing.assert_allclose(ds.test_x * 255, arrays["test_images"].reshape(10, 784), atol=1e-4)
    np.testing.assert_array_equal(ds.train_y, arrays["train_labels"])
    np.testing.assert_array_equal(ds.test_y, arrays["test_labels"])
    assert ds.image_shape == (28, 28) and ds.n_classes == 10
    assert not ds.train_y.flags.writeable  # clean labels cannot be changed in place
    assert load_dataset("fashion_mnist", directory=tmp_path, hub=False, check_sizes=False).checksum() == ds.checksum()


def test_load_fashion_mnist_checks_sizes_and_content(tmp_path):
    _fake_fashion_dir(tmp_path)
    with pytest.raises(ValueError, match="Fashion-MNIST has 60000 train images, found 30"):
        load_fashion_mnist(tmp_path, hub=False)
    write_idx(tmp_path / "train-labels-idx1-ubyte.gz", np.full(30, 12, dtype=np.uint8))
    with pytest.raises(ValueError, match="labels must lie in 0..9"):
        load_fashion_mnist(tmp_path, hub=False, check_sizes=False)
    write_idx(tmp_path / "train-labels-idx1-ubyte.gz", np.zeros(29, dtype=np.uint8))
    with pytest.raises(ValueError, match="one label per image"):
        load_fashion_mnist(tmp_path, hub=False, check_sizes=False)


def test_missing_files_error_names_the_four_files(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # `import datasets` fails: hub not available
    with pytest.raises(FashionMNISTUnavailable) as err:
        load_fashion_mnist(tmp_path, packages=())  # no package route: tests never reach a registry
    assert isinstance(err.value, FileNotFoundError)
    msg = str(err.value)
    for stem in FASHION_MNIST_FILES.values():
        assert stem in msg
    assert str(tmp_path) in msg and "github.com/zalandoresearch/fashion-mnist" in msg
    assert "datasets` package is not installed" in msg and "load_digits_stand_in" in msg
    assert "\n" not in msg  # one line (the command line prints it as one error)
    # partially present: only the absent ones are listed as missing
    write_idx(tmp_path / "train-images-idx3-ubyte.gz", np.zeros((1, 28, 28), np.uint8))
    with pytest.raises(FashionMNISTUnavailable, match="missing .*: train-labels-idx1-ubyte, t10k-images"):
        load_fashion_mnist(tmp_path, hub=False, packages=())
    with pytest.raises(FashionMNISTUnavailable, match="No directory was given"):
        load_fashion_mnist(None, hub=False)


class _FakeSplit(dict):
    pass


def test_hub_fallback_used_when_files_absent_and_failures_reported(tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    calls = []

    def load(repo, cache_dir=None):
        calls.append(repo)
        if repo == "zalando-datasets/fashion_mnist":
            raise ConnectionError("offline")
        return {split: _FakeSplit(image=[rng.integers(0, 256, (28, 28), dtype=np.uint8) for _ in range(n)],
                                  label=list(np.arange(n) % 10))
                for split, n in (("train", 12), ("test", 4))}

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load))
    ds = load_fashion_mnist(tmp_path, check_sizes=False, packages=())
    assert calls == ["zalando-datasets/fashion_mnist", "fashion_mnist"]
    assert ds.train_x.shape == (12, 784) and ds.test_x.shape == (4, 784) and ds.source == "huggingface:fashion_mnist"

    def fail(repo, cache_dir=None):
        raise ConnectionError(f"no network for {repo}")

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=fail))
    with pytest.raises(FashionMNISTUnavailable, match="no network for zalando-datasets/fashion_mnist") as err:
        load_fashion_mnist(tmp_path, packages=())
    # `datasets` is installed here: the advice is to let it fetch the data, not to install it; the study's keys named
    assert "installed (pip install datasets)" not in str(err.value) and "where `datasets` fetches the hub copy" in \
        str(err.value)
    assert "`image.fashion_mnist_dir` of params.yaml" in str(err.value) and "`image.dataset: digits_stand_in`" in \
        str(err.value)
    monkeypatch.setitem(sys.modules, "datasets", None)  # not installed
    with pytest.raises(FashionMNISTUnavailable, match=r"once `datasets` is installed \(pip install datasets\)"):
        load_fashion_mnist(tmp_path, packages=())


def test_load_dataset_rejects_unknown_names():
    with pytest.raises(ValueError, match="name must be one of 'fashion_mnist', 'digits_stand_in'"):
        load_dataset("mnist")


def test_dataset_validation():
    x, y = np.zeros((4, 3)), np.array([0, 1, 2, 3])
    with pytest.raises(ValueError, match=r"train_x must be finite and scaled to \[0, 1\]"):
        Dataset(x + 2, y, x, y, name="t")
    with pytest.raises(ValueError, match="train_y must lie in 0..2"):
        Dataset(x, y, x, y, name="t", n_classes=3)
    with pytest.raises(ValueError, match="same number of features"):
        Dataset(x, y, np.zeros((4, 2)), y, name="t")
    with pytest.raises(ValueError, match="one label per row"):
        Dataset(x, y[:3], x, y, name="t")
    src = np.zeros((4, 3), dtype=np.float32)
    ds = Dataset(src, y, x, y, name="t")
    src[0, 0] = 1.0  # the caller's array is copied, not frozen or shared
    assert ds.train_x[0, 0] == 0.0 and src.flags.writeable


# -- the digits stand-in ----------------------------------------------------------------------
def test_digits_stand_in_split():
    ds = load_digits_stand_in()
    assert ds.is_stand_in and ds.name == "digits (stand-in for Fashion-MNIST)" and "stand-in" in repr(ds)
    assert (ds.n_train, ds.n_test, ds.n_features) == (1437, 360, 64)
    assert ds.train_x.dtype == np.float32 and 0.0 <= ds.train_x.min() and ds.train_x.max() == 1.0
    # deterministic
    again = load_dataset("digits_stand_in")
    assert again.checksum() == ds.checksum()
    assert load_digits_stand_in(seed=1).checksum() != ds.checksum()
    # disjoint and complete: every bundled image lands in exactly one part
    from sklearn.datasets import load_digits

    full = (load_digits().data / 16.0).astype(np.float32)
    both = np.concatenate([ds.train_x, ds.test_x])

    def sort_rows(a):
        return a[np.lexsort(a.T[::-1])]

    # train + test is exactly the bundled set as a multiset of images: a partition, so disjoint
    np.testing.assert_array_equal(sort_rows(both), sort_rows(full))
    # stratified: class proportions within one example of the overall proportion
    counts = np.bincount(load_digits().target, minlength=10)
    assert np.all(np.abs(np.bincount(ds.test_y, minlength=10) - 0.2 * counts) <= 1)
    assert np.all(np.abs(np.bincount(ds.train_y, minlength=10) - 0.8 * counts) <= 1)
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        load_digits_stand_in(seed=None)


# -- label noise ------------------------------------------------------------------------------
@pytest.mark.parametrize("rate", [0.0, 0.2, 0.4, 0.6, 0.8])
def test_noise_flip_rate_and_never_itself(rate):
    n, K = 20_000, 10
    y = np.arange(n) % K
    noisy, flipped = symmetric_label_noise(y, rate, n_classes=K, seed=3)
    assert noisy.dtype == np.int64 and flipped.dtype == bool
    np.testing.assert_array_equal(flipped, noisy != y)  # a flip always changes the label
    se = np.sqrt(rate * (1 - rate) / n)
    assert abs(flipped.mean() - rate) <= 4 * se
    if rate == 0.0:
        assert not flipped.any() and np.array_equal(noisy, y)
    assert np.all((0 <= noisy) & (noisy < K))


def test_noise_is_uniform_over_the_other_classes():
    n, K, rate = 30_000, 10, 0.6
    y = np.full(n, 3)
    noisy, flipped = symmetric_label_noise(y, rate, n_classes=K, seed=11)
    counts = np.bincount(noisy[flipped], minlength=K)
    assert counts[3] == 0
    others = np.delete(counts, 3)
    expected = flipped.sum() / (K - 1)
    chi2 = float(np.sum((others - expected) ** 2 / expected))
    assert chi2 < 27.9  # chi-square, 8 degrees of freedom: 99.95 % quantile 27.87 (deterministic seed)
    # transition matrix for a mixed label vector: each row's off-diagonal mass spread evenly
    y = np.arange(n) % K
    noisy, _ = symmetric_label_noise(y, rate, n_classes=K, seed=12)
    T = np.zeros((K, K))
    np.add.at(T, (y, noisy), 1)
    T /= T.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(np.diag(T), 1 - rate, atol=0.03)
    off = T[~np.eye(K, dtype=bool)]
    np.testing.assert_allclose(off, rate / (K - 1), atol=0.02)


def test_noise_deterministic_per_seed_and_input_untouched():
    y = np.arange(1000) % 10
    before = y.copy()
    a = symmetric_label_noise(y, 0.4, n_classes=10, seed=5)
    b = symmetric_label_noise(y, 0.4, n_classes=10, seed=5)
    c = symmetric_label_noise(y, 0.4, n_classes=10, seed=6)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])
    np.testing.assert_array_equal(y, before)
    g1, g2 = np.random.default_rng(0), np.random.default_rng(0)
    assert np.array_equal(symmetric_label_noise(y, 0.4, n_classes=10, seed=g1)[0],
                          symmetric_label_noise(y, 0.4, n_classes=10, seed=g2)[0])


@pytest.mark.parametrize("rate", [1.0, 1.5, -0.1, float("nan"), "0.2", True])
def test_noise_rejects_bad_rates(rate):
    with pytest.raises(ValueError, match="rate must"):
        symmetric_label_noise(np.zeros(5, dtype=int), rate, n_classes=10, seed=0)


def test_noise_rejects_bad_labels_and_classes():
    with pytest.raises(ValueError, match="labels must lie in 0..9"):
        symmetric_label_noise(np.array([0, 10]), 0.1, n_classes=10, seed=0)
    with pytest.raises(ValueError, match="n_classes must be an integer >= 2"):
        symmetric_label_noise(np.array([0, 0]), 0.1, n_classes=1, seed=0)
    with pytest.raises(ValueError, match="labels must be integers"):
        symmetric_label_noise(np.array([0.0, 1.0]), 0.1, n_classes=10, seed=0)
    with pytest.raises(ValueError, match="seed must be"):
        symmetric_label_noise(np.array([0, 1]), 0.1, n_classes=10, seed=-1)


def test_apply_label_noise_touches_training_labels_only():
    ds = Dataset(np.zeros((200, 2)), np.arange(200) % 10, np.zeros((50, 2)), np.arange(50) % 10, name="t")
    noisy, flipped = apply_label_noise(ds, 0.5, seed=0)
    assert flipped.any()
    np.testing.assert_array_equal(noisy.train_y != ds.train_y, flipped)
    assert noisy.test_y is ds.test_y and noisy.train_x is ds.train_x  # shared, read-only, not copied
    assert noisy.checksum(labels=False) == ds.checksum(labels=False)
    np.testing.assert_array_equal(ds.train_y, np.arange(200) % 10)
