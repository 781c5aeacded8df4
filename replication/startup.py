"""A stop signal while ``sabo-bench`` starts, or while it exits, is one line, not a traceback.

Python importing the command's modules (numpy, matplotlib, ...) takes seconds, before
:func:`replication.cli.main` installs the stop handling of :mod:`replication.stopping`; a Ctrl-C
then raised ``KeyboardInterrupt`` inside some import: a 20-50 line traceback, exit status -2.
:mod:`replication.cli` imports this module before anything heavy, and in the program itself
(``sabo-bench``, ``python -m replication.cli``) it installs, for SIGINT and SIGTERM, a handler
that says so in one line and exits with 128 + the signal's number, as a stopped command does.
``main``'s stop handling replaces it while the command works and puts it back when the work is
over; :func:`exiting` then changes what it says. Nothing has been written before the work starts,
and everything is written (or checkpointed) when it ends, so nothing is left half-done either way:
a Ctrl-C in the ~0.3 s the interpreter takes to shut down after a finished study killed the process
by SIGINT (exit status -2, no word) before. Importing the command line elsewhere (tests, a worker
process that re-imports it) installs nothing, and a signal already ignored stays ignored.
"""
from __future__ import annotations

import os
import signal
import sys

SIGNALS = (signal.SIGINT, signal.SIGTERM)


#: What the handler says after "stopped by SIG... while", by phase (:func:`exiting`).
_SAID = {"starting": "starting: nothing was done",
         "exiting": "exiting: the command's work was over (what it printed above says how it ended)"}
_phase = "starting"


def _stopped(signum, frame) -> None:
    os.write(2, f"stopped by {signal.Signals(signum).name} while {_SAID[_phase]}\n".encode())
    os._exit(128 + signum)


def exiting() -> None:
    """The command's work is over (``main`` returns or reports how it ended): a stop signal from now on says so."""
    global _phase
    _phase = "exiting"


def is_the_program() -> bool:
    """Whether this process is ``sabo-bench`` itself: its console script, or ``python -m replication.cli``.

    Read from the command line the process was started with (``sys.orig_argv``): a worker process
    that multiprocessing starts re-imports the parent's main module with the parent's ``sys.argv``.
    """
    argv = sys.orig_argv
    if "-m" in argv[:-1]:
        return argv[argv.index("-m") + 1] == "replication.cli"
    return len(argv) > 1 and os.path.basename(argv[1]) == "sabo-bench"


if is_the_program():
    for _signum in SIGNALS:
        if signal.getsignal(_signum) in (signal.SIG_DFL, signal.default_int_handler):
            signal.signal(_signum, _stopped)
