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
"""
from __future__ import annotations

import io
import json
import zipfile

import numpy as np

ARRAY_KEY = "__ndarray__"
#: How every file :func:`dumps` writes begins: an ``.npz`` is a zip archive.
_ZIP_MAGIC = b"PK\x03\x04"
#: How a pickle of protocol 2 or later begins (its PROTO opcode).
_PICKLE_MAGIC = b"\x80"
_TREE = "tree"
_ARRAY_KINDS = "biuf"


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
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            files = {name: npz[name] for name in npz.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError) as exc:
        raise StateFormatError(f"not a state file of this format ({type(exc).__name__}: {exc})") from exc
    foreign = sorted(name for name, value in files.items() if not isinstance(value, np.ndarray))
    if foreign:  # np.load returns a zip member that is no .npy as its raw bytes
        raise StateFormatError(f"not a state file of this format (archive members {foreign} are not NumPy arrays)")
    raw = files.pop(_TREE, None)
    if raw is None or raw.dtype != np.uint8 or raw.ndim != 1:
        raise StateFormatError("not a state file of this format (no structure entry)")
    try:
        structure = json.loads(raw.tobytes())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StateFormatError(f"garbled structure ({exc})") from exc
    used: set[str] = set()

    def dec(node):
        if isinstance(node, dict):
            if ARRAY_KEY in node:
                key = node[ARRAY_KEY]
                if len(node) != 1 or not isinstance(key, str) or key not in files:
                    raise StateFormatError(f"dangling array reference {node!r}")
                arr = files[key]
                if arr.dtype.kind not in _ARRAY_KINDS:
                    raise StateFormatError(f"array {key} has dtype {arr.dtype} (only bool, int, float)")
                used.add(key)
                return arr
            return {k: dec(v) for k, v in node.items()}
        if isinstance(node, list):
            return [dec(v) for v in node]
        return node

    tree = dec(structure)
    if set(files) - used:
        raise StateFormatError(f"unreferenced arrays {sorted(set(files) - used)}")
    return tree
