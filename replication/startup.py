"""A stop signal while ``sabo-bench`` starts is one line, not a traceback.

Python importing the command's modules (numpy, matplotlib, ...) takes seconds, before
:func:`replication.cli.main` installs the stop handling of :mod:`replication.stopping`; a Ctrl-C
then raised ``KeyboardInterrupt`` inside some import: a 20-50 line traceback, exit status -2.
:mod:`replication.cli` imports this module before anything heavy, and in the program itself
(``sabo-bench``, ``python -m replication.cli``) it installs, for SIGINT and SIGTERM, a handler
that says so in one line and exits with 128 + the signal's number, as a stopped command does;
:func:`done` puts the previous handlers back once ``main`` takes over. Nothing has been written
by then, so nothing is left half-done. Importing the command line elsewhere (tests, a worker
process that re-imports it) installs nothing, and a signal already ignored stays ignored.
"""
from __future__ import annotations

import os
import signal
import sys

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_previous: dict = {}


def _stopped_while_starting(signum, frame) -> None:
    os.write(2, f"stopped by {signal.Signals(signum).name} while starting: nothing was done\n".encode())
    os._exit(128 + signum)


def is_the_program() -> bool:
    """Whether this process is ``sabo-bench`` itself: its console script, or ``python -m replication.cli``.

    Read from the command line the process was started with (``sys.orig_argv``): a worker process
    that multiprocessing starts re-imports the parent's main module with the parent's ``sys.argv``.
    """
    argv = sys.orig_argv
    if "-m" in argv[:-1]:
        return argv[argv.index("-m") + 1] == "replication.cli"
    return len(argv) > 1 and os.path.basename(argv[1]) == "sabo-bench"


def done() -> None:
    """The handlers from before this module's, back (``main`` installs its own next)."""
    while _previous:
        signum, handler = _previous.popitem()
        signal.signal(signum, handler)


if is_the_program():
    for _signum in SIGNALS:
        _handler = signal.getsignal(_signum)
        if _handler in (signal.SIG_DFL, signal.default_int_handler):
            _previous[_signum] = signal.signal(_signum, _stopped_while_starting)
