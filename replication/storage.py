"""Files of the runs directory: atomic writes, data-only reads, and bad files moved aside.

* Atomic: write to a temporary file in the same directory, flush and fsync it, ``os.replace``
  it over the target (atomic on POSIX) and fsync the directory, so a reader (or a run killed
  mid-write) never sees half a file. The file gets the mode an ordinary ``open`` would give
  (0666 minus the process umask), so a shared ``runs/`` stays readable by the group.
* Data only: records are JSON; checkpoints are :mod:`sabo.serialization` state files (JSON
  structure and ``.npz`` arrays loaded with ``allow_pickle=False``). Nothing read from the runs
  directory is unpickled, imported or evaluated.
* Bounded: only regular files are read (:func:`read_bytes`): a FIFO would block the reader, a
  device (``/dev/zero``) never end, a directory fail in ``open``. Each is refused as
  :class:`UnusableFile` without being opened, as is a file larger than the reader's limit
  (:data:`MAX_JSON_BYTES`, :data:`MAX_STATE_BYTES`) and, for what the runs directory holds, a
  symbolic link that leads out of it; JSON nested deeper than :data:`sabo.bounded_json.MAX_DEPTH`
  levels is refused before it is parsed.
* A file that cannot be used (truncated, garbled, another run's) is renamed to
  ``<name>.quarantined-<UTC time>`` beside it and reported in one line; the caller then
  recomputes what it held.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

from sabo import bounded_json, serialization

from .errors import WriteFailed

QUARANTINE_MARK = ".quarantined-"
_TMP_SUFFIX = ".tmp"
#: The largest JSON file read (a run record is kilobytes; its curve has at most ~120 points per column).
MAX_JSON_BYTES = 64 * 2**20
#: The largest state file read (a checkpoint: the optimizer's arrays, e.g. 8 MB for CMA-ES's covariance at d = 1000).
MAX_STATE_BYTES = 4 * 2**30
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"))


class UnusableFile(OSError):
    """A path that is not read: no regular file, a symbolic link out of the directory it must stay in, or larger
    than the reader's limit. The message says which, without the path (:func:`quarantine` adds it)."""


def _process_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_process_umask()


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary file beside ``path`` for the block to fill, renamed over ``path`` when the block ends.

    For a file that another library writes by name (an MLflow SQLite store): the block gets the
    empty file's path. If the block raises, the temporary file is deleted and ``path`` is left
    as it was. An ``OSError`` on the way (a full disk, a read-only directory) is raised as
    :class:`~replication.errors.WriteFailed` naming ``path``, not the temporary file.
    """
    path = Path(path)
    with _naming(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=_TMP_SUFFIX)
        os.close(fd)
    tmp = Path(name)
    try:
        with _naming(path):
            os.chmod(tmp, _FILE_MODE)  # mkstemp creates 0600
        yield tmp
        with _naming(path):
            os.replace(tmp, path)
            dir_fd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def _naming(path: Path):
    """An ``OSError`` of the block as :class:`~replication.errors.WriteFailed` about ``path``."""
    try:
        yield
    except WriteFailed:
        raise
    except OSError as exc:
        raise WriteFailed(exc.errno, exc.strerror or str(exc), str(path)) from exc


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """``data`` written to ``path`` atomically (flushed and synced before the rename)."""
    with atomic_file(path) as tmp, _naming(Path(path)), open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def atomic_link(source: str | os.PathLike, target: str | os.PathLike) -> None:
    """Make ``target`` another name of the file ``source`` (a hard link: no second copy of the data),
    atomically; a copy where the file system has no hard links (or ``target`` is on another one)."""
    with atomic_file(target) as tmp, _naming(Path(target)):
        tmp.unlink()
        try:
            os.link(source, tmp)
        except OSError:
            shutil.copyfile(source, tmp)


def remove_stale_temporaries(path: str | os.PathLike) -> list[Path]:
    """Delete temporary files that an interrupted :func:`atomic_file` of ``path`` left.

    Call it only while no other writer of ``path`` can be active (e.g. holding the run's lock).
    """
    path = Path(path)
    if not path.parent.is_dir():
        return []
    stale = list(path.parent.glob(f".{path.name}.*{_TMP_SUFFIX}"))
    for tmp in stale:
        tmp.unlink(missing_ok=True)
    return stale


def remove_temporaries_in(directory: str | os.PathLike) -> list[Path]:
    """Delete the temporary files that interrupted :func:`atomic_file` calls left directly in ``directory``
    (a report killed mid-write); as :func:`remove_stale_temporaries`, only while nothing else writes there."""
    directory = Path(directory)
    stale = list(directory.glob(f".*{_TMP_SUFFIX}")) if directory.is_dir() else []
    for tmp in stale:
        tmp.unlink(missing_ok=True)
    return stale


def write_json(path, obj) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=1, sort_keys=True) + "\n").encode())


def kind_of(mode: int) -> str:
    """What a file of ``mode`` (``st_mode``) is, in words: "a directory", "a FIFO", ..., "a regular file"."""
    return next((name for test, name in _KINDS if test(mode)), "a regular file")


def read_bytes(path, *, limit: int, within=None) -> bytes:
    """The content of the regular file ``path``, at most ``limit`` bytes; :class:`UnusableFile` otherwise.

    ``within``: a directory that ``path`` must lie in once symbolic links are resolved. A missing file (or a
    link to one) raises ``FileNotFoundError``. The file is checked with ``stat`` before it is opened (opening a
    device can act on it), opened without following links and without blocking, and checked again."""
    real = os.path.realpath(path, strict=True)
    if within is not None:
        root = os.path.realpath(within)
        if os.path.commonpath([real, root]) != root:
            raise UnusableFile(f"a symbolic link to {real}, outside {root}")
    before = os.stat(real)
    if not stat.S_ISREG(before.st_mode):
        raise UnusableFile(f"not a regular file but {kind_of(before.st_mode)}")
    fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (before.st_dev, before.st_ino) or not stat.S_ISREG(opened.st_mode):
            raise UnusableFile("replaced while it was opened")
        data = fh.read(limit + 1) if opened.st_size <= limit else b""
    if opened.st_size > limit or len(data) > limit:
        raise UnusableFile(f"larger than {limit} bytes, the most read from such a file")
    return data


def read_json(path, *, within=None):
    """The JSON file ``path`` (:func:`read_bytes` with :data:`MAX_JSON_BYTES`, nesting bounded); ``ValueError``
    if it is not JSON."""
    return bounded_json.loads(read_bytes(path, limit=MAX_JSON_BYTES, within=within))


def write_state(path, tree) -> None:
    """Write a state tree (:mod:`sabo.serialization`) atomically."""
    atomic_write_bytes(path, serialization.dumps(tree))


def read_state(path, *, within=None):
    """Read a state tree (:func:`read_bytes` with :data:`MAX_STATE_BYTES`); raises
    :class:`sabo.serialization.StateFormatError` on a bad file."""
    return serialization.loads(read_bytes(path, limit=MAX_STATE_BYTES, within=within))


def quarantine(path: str | os.PathLike, reason: str, then: str = "the run will be recomputed") -> Path:
    """Move ``path`` (whatever it is: a file, a link, a directory) aside to ``<name>.quarantined-<UTC time>``
    and report it in one line on stderr, ending with ``then``."""
    path = Path(path)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    target = path.with_name(f"{path.name}{QUARANTINE_MARK}{stamp}")
    os.replace(path, target)
    print(f"warning: {path} is unusable ({reason}); moved aside to {target.name}, {then}", file=sys.stderr, flush=True)
    return target


def quarantine_unless_regular(path: str | os.PathLike, then: str) -> None:
    """Quarantine whatever is at ``path`` unless it is a regular file or nothing (for a path a library opens
    itself, e.g. a lock file: a directory there makes it fail, a link could lead it to another file)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        quarantine(path, f"not a regular file but {kind_of(mode)}", then)


def quarantined_files(directory: str | os.PathLike) -> list[Path]:
    """Every quarantined file under ``directory``, sorted."""
    directory = Path(directory)
    return sorted(directory.rglob(f"*{QUARANTINE_MARK}*")) if directory.is_dir() else []
