"""Errors shared by the studies."""
from __future__ import annotations

import errno


class ResourceUnavailable(Exception):
    """A model or data set a study needs is not here (offline, not cached, not prepared).

    The message names what is missing and how to supply it; the command line prints it
    without a traceback. Concrete errors also derive from the built-in type that fits
    (``FileNotFoundError``, ``RuntimeError``), so existing handlers keep working.
    """


def one_line(text, limit: int | None = None) -> str:
    """``text`` (or an exception's message) on one line, every run of whitespace a single space, cut
    after ``limit`` characters with "..." where longer: for messages that quote other libraries'
    errors (MLflow's, the hub's, transformers' run over several lines)."""
    text = " ".join(str(text).split())
    return text if limit is None or len(text) <= limit else text[:limit] + "..."


class PackageUnavailable(ResourceUnavailable, ImportError):
    """An optional package a method needs is not installed (TuRBO-1 and GIBO without the ``bo`` extra)."""


class UsageError(Exception):
    """A mistake in what the user asked for: the command line or ``params.yaml``.

    The message is complete and names the offending argument or key (``params.yaml: a.b = 'x':
    must be ...``); the command line prints ``error: <message>`` and exits with status 2,
    without a traceback. A message may hold several lines, one per problem.
    """


class RunFailed(Exception):
    """A run raised an unexpected exception (a bug in an optimizer or problem, a machine's limit).

    The message is one line: the run, its method, the exception and where it was raised; the
    whole traceback is in the file it names. The study stops (running runs checkpoint, as on
    Ctrl-C); the command line prints the line and exits with status 1, and running the same
    command again retries the run. Built from the message alone, so it crosses process
    boundaries (local workers, Ray) unchanged.
    """


class RunsFailed(Exception):
    """Runs that raised while the study went on (``--keep-going``): every other run was executed.

    ``failures`` holds each failed run's :class:`RunFailed` line, which names its traceback file;
    ``records`` the records of the runs that finished, in the order of the study's runs. The
    command line prints the failures after the study's summary and exits with status 1; running
    the same command again retries the failed runs.
    """

    def __init__(self, failures: list[str], records: list[dict]):
        super().__init__(f"{len(failures)} run(s) failed")
        self.failures, self.records = list(failures), list(records)


class WriteFailed(OSError):
    """A file could not be written: a full disk, a read-only or forbidden place.

    Raised by the atomic writes of :mod:`replication.storage` with the file meant (``filename``,
    not its temporary sibling) and why (``errno``, ``strerror``); the file is left as it was.
    """


#: what a write meets when the place, not the program, is at fault
WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EACCES, errno.EPERM, errno.EIO}


def file_problem(exc: OSError) -> str | None:
    """``exc`` as "cannot write <file> (<why>)" when it is a :class:`WriteFailed` or an OSError of
    :data:`WRITE_ERRNOS` about a file (a directory that cannot be made, a lock file in a read-only
    place), else None (an OSError that is more likely a bug, shown with its traceback)."""
    if not isinstance(exc, WriteFailed) and (exc.errno not in WRITE_ERRNOS or exc.filename is None):
        return None
    return f"cannot write {exc.filename} ({exc.strerror or one_line(exc)})"
