"""Data-only serialisation of state trees: JSON for the structure, NumPy ``.npz`` for arrays.

A *state tree* is built from ``dict`` (``str`` keys), ``list``, ``None``, ``bool``, ``int``,
``float``, ``str`` and NumPy arrays of boolean, integer or floating dtype (NumPy scalars of
those kinds are stored as Python numbers). Nothing else is written, and reading never
unpickles: the structure is plain JSON and the arrays are loaded with
``allow_pickle=False``, so a file from an untrusted directory (a shared ``runs/`` for
instance) cannot execute code; at worst it decodes to wrong data, which the reader then
validates (see :meth:`sabo.protocol.AskTellOptimizer.from_state_dict`).

``loads(dumps(tree))`` equals ``tree`` exactly: floats (NaN and infinities included) and
arbitrarily large integers (e.g. a PCG64 state) survive bit for bit, arrays keep dtype and
shape. Tuples are refused rather than silently turned into lists.

Reading is bounded by the size of the bytes read: :func:`loads` inspects the archive's directory
and each array's ``.npy`` header before it decompresses or allocates anything, and refuses what
:func:`dumps` never writes: compressed members (a zip bomb inflates 1.5 MB into gigabytes),
members that together hold more bytes than the archive (overlapping entries), an array header
that declares more data than its member holds (NumPy would allocate the declared array first),
and a structure nested deeper than :data:`sabo.bounded_json.MAX_DEPTH` levels.
"""
from __future__ import annotations

import io
import json
import math
import zipfile

import numpy as np
from numpy.lib import format as npy_format

from . import bounded_json

ARRAY_KEY = "__ndarray__"
#: How every file :func:`dumps` writes begins: an ``.npz`` is a zip archive.
_ZIP_MAGIC = b"PK\x03\x04"
#: How a pickle of protocol 2 or later begins (its PROTO opcode).
_PICKLE_MAGIC = b"\x80"
_TREE = "tree"
_ARRAY_KINDS = "biuf"
#: The most arrays a state file may hold (the suite's optimizers save a handful).
MAX_ARRAYS = 10_000
_HEADER_READERS = {(1, 0): npy_format.read_array_header_1_0, (2, 0): npy_format.read_array_header_2_0}


class StateFormatError(ValueError):
    """The bytes are not a state tree written by :func:`dumps` (truncated, garbled or foreign)."""


def dumps(tree) -> bytes:
    """Serialise a state tree to bytes (an uncompressed ``.npz`` archive)."""
    arrays: dict[str, np.ndarray] = {}

    def enc(node, where: str):
        if node is None or isinstance(node, (bool, str)):
            return node
        if isinstance(node, (int, float)):
            return node
        if isinstance(node, np.generic) and node.dtype.kind in _ARRAY_KINDS:
            return node.item()
        if isinstance(node, np.ndarray):
            if node.dtype.kind not in _ARRAY_KINDS:
                raise TypeError(f"{where}: arrays of dtype {node.dtype} cannot be stored (only bool, int, float)")
            key = f"a{len(arrays)}"
            arrays[key] = node
            return {ARRAY_KEY: key}
        if isinstance(node, dict):
            out = {}
            for k, v in node.items():
                if not isinstance(k, str):
                    raise TypeError(f"{where}: dict keys must be str (got {k!r})")
                if k == ARRAY_KEY:
                    raise TypeError(f"{where}: the key {ARRAY_KEY!r} is reserved")
                out[k] = enc(v, f"{where}.{k}")
            return out
        if isinstance(node, list):
            return [enc(v, f"{where}[{i}]") for i, v in enumerate(node)]
        raise TypeError(f"{where}: {type(node).__name__} is not state data "
                        "(allowed: dict, list, str, int, float, bool, None, numeric numpy arrays)")

    structure = json.dumps(enc(tree, "state"), allow_nan=True, separators=(",", ":")).encode()
    buf = io.BytesIO()
    np.savez(buf, **{_TREE: np.frombuffer(structure, dtype=np.uint8)}, **arrays)
    return buf.getvalue()


def loads(data: bytes):
    """Read bytes written by :func:`dumps`; raises :class:`StateFormatError` on anything else.

    Bytes that do not begin as a zip archive are refused before NumPy sees them: ``np.load``
    would take them for a pickle and say so, whatever they are."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"loads() takes the bytes of a state file (got {type(data).__name__})")
    data = bytes(data)
    if not data.startswith(_ZIP_MAGIC):
        got = ("a Python pickle, which is never unpickled" if data.startswith(_PICKLE_MAGIC)
               else f"{len(data)} bytes" + (f" beginning {data[:8]!r}" if data else ""))
        raise StateFormatError(f"not a state file of this format (a .npz archive written by "
                               f"sabo.serialization.dumps, beginning {_ZIP_MAGIC!r}); got {got}")
    _check_archive(data)
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            files = {name: npz[name] for name in npz.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError) as exc:
        raise StateFormatError(f"not a state file of this format ({type(exc).__name__}: {exc})") from exc
    raw = files.pop(_TREE, None)
    if raw is None or raw.dtype != np.uint8 or raw.ndim != 1:
        raise StateFormatError("not a state file of this format (no structure entry)")
    try:
        structure = bounded_json.loads(raw.tobytes())
    except ValueError as exc:  # not UTF-8, not JSON, or nested too deep
        raise StateFormatError(f"garbled structure ({exc})") from exc
    used: set[str] = set()

    def dec(node):
        if isinstance(node, dict):
            if ARRAY_KEY in node:
                key = node[ARRAY_KEY]
                if len(node) != 1 or not isinstance(key, str) or key not in files:
                    raise StateFormatError(f"dangling array reference {node!r}")
                used.add(key)
                return files[key]
            return {k: dec(v) for k, v in node.items()}
        if isinstance(node, list):
            return [dec(v) for v in node]
        return node

    tree = dec(structure)
    if set(files) - used:
        raise StateFormatError(f"unreferenced arrays {sorted(set(files) - used)}")
    return tree


def _check_archive(data: bytes) -> None:
    """Refuse, before anything is decompressed or allocated, an archive that :func:`dumps` cannot have written
    and whose reading could take more memory than its size (module docstring)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
            if len(members) > MAX_ARRAYS:
                raise StateFormatError(f"not a state file of this format ({len(members)} archive members; at most "
                                       f"{MAX_ARRAYS})")
            foreign = sorted(m.filename for m in members if not m.filename.endswith(".npy"))
            if foreign:  # np.load would return such a member as its raw bytes
                raise StateFormatError(f"not a state file of this format (archive members {foreign} are not NumPy "
                                       "arrays)")
            for member in members:
                _check_member(archive, member)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError, RuntimeError) as exc:
        if isinstance(exc, StateFormatError):
            raise
        raise StateFormatError(f"not a state file of this format ({type(exc).__name__}: {exc})") from exc
    total = sum(member.file_size for member in members)
    if total > len(data):
        raise StateFormatError(f"not a state file of this format (its members claim {total} bytes, more than the "
                               f"{len(data)} bytes of the archive)")


def _check_member(archive: zipfile.ZipFile, member: zipfile.ZipInfo) -> None:
    """One member: stored uncompressed as an ``.npy`` array of a numeric dtype whose header matches its size."""
    where = f"not a state file of this format (archive member {member.filename!r}"
    if member.compress_type != zipfile.ZIP_STORED or member.compress_size != member.file_size:
        raise StateFormatError(f"{where} is compressed, {member.compress_size} bytes declaring "
                               f"{member.file_size}; dumps writes members uncompressed)")
    with archive.open(member) as fh:  # reads the header only
        reader = _HEADER_READERS.get(npy_format.read_magic(fh))
        if reader is None:
            raise StateFormatError(f"{where} has an .npy format version this reader does not take)")
        shape, _, dtype = reader(fh)
        header = fh.tell()
    if dtype.kind not in _ARRAY_KINDS:
        pickled = ", whose arrays are pickles, never unpickled" if dtype.hasobject else ""
        raise StateFormatError(f"{where} has dtype {dtype}{pickled}; state arrays are bool, int or float)")
    declared = header + math.prod(shape) * dtype.itemsize
    if declared != member.file_size:
        raise StateFormatError(f"{where} declares an array of shape {shape} and dtype {dtype}, {declared} bytes "
                               f"with its header, but holds {member.file_size})")
