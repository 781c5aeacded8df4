"""Atomic file writes: a reader (or a run killed mid-write) never sees half a file.

Write to a temporary file in the same directory, flush and fsync it, then ``os.replace``
it over the target (atomic on POSIX), and fsync the directory so the rename is durable.
"""
from __future__ import annotations

import json
import os
import pickle
import tempfile
from pathlib import Path


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_json(path, obj) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=1, sort_keys=True) + "\n").encode())


def read_json(path):
    with open(path, "rb") as fh:
        return json.loads(fh.read())


def write_pickle(path, obj) -> None:
    atomic_write_bytes(path, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def read_pickle(path):
    with open(path, "rb") as fh:
        return pickle.load(fh)
