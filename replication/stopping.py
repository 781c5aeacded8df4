"""Clean stops: Ctrl-C or SIGTERM ends a study within seconds and every run keeps a checkpoint.

The first SIGINT/SIGTERM a process receives is a *stop request*:

* inside a run's iteration loop (:func:`iterations`), the run finishes its current iteration,
  writes a checkpoint and raises :class:`StopRequested` (so the state it saves is consistent);
* anywhere else (building a problem, waiting for workers or for a lock) it raises
  :class:`StopRequested` at once: there is nothing half-done to save.

A second signal while a stop is pending raises at once. Once a stop was requested, every
later :func:`check` raises too, so a worker process never starts another run.
:class:`StopRequested` derives from ``KeyboardInterrupt``: generic ``except Exception`` code
does not swallow it. The command line turns it into exit status 128 + signal number (130 for
SIGINT, 143 for SIGTERM) without a traceback.

Worker processes (:func:`worker_init`) ignore SIGINT (a terminal sends Ctrl-C to the whole
process group; the main process decides) and treat SIGTERM as a stop request while they
execute a task (:func:`task`); an idle worker exits at once, quietly. A watchdog thread ends a
worker whose parent has died, so that no worker outlives a killed study.
"""
from __future__ import annotations

import contextlib
import os
import signal
import threading

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
PARENT_POLL_S = 0.5


class StopRequested(KeyboardInterrupt):
    """A stop signal arrived; ``signum`` says which, ``exit_status`` is 128 + signum."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


_requested: int | None = None
_loop_depth = 0
_task_depth = 0


def requested() -> int | None:
    """The signal of the pending stop request, or None."""
    return _requested


def check() -> None:
    """Raise :class:`StopRequested` if a stop was requested."""
    if _requested is not None:
        raise StopRequested(_requested)


def _handler(signum, frame) -> None:
    global _requested
    first = _requested is None
    _requested = signum
    if not first or _loop_depth == 0:
        raise StopRequested(signum)


@contextlib.contextmanager
def iterations():
    """Mark an iteration loop: a stop request waits for :func:`check` at the next iteration boundary."""
    global _loop_depth
    _loop_depth += 1
    try:
        yield
    finally:
        _loop_depth -= 1


@contextlib.contextmanager
def task():
    """Mark a worker's task: outside one, a worker's SIGTERM ends the process without a traceback."""
    global _task_depth
    _task_depth += 1
    try:
        yield
    finally:
        _task_depth -= 1


def _worker_handler(signum, frame) -> None:
    if _task_depth == 0:
        os._exit(128 + signum)
    _handler(signum, frame)


@contextlib.contextmanager
def handle_signals():
    """Install the stop handler for SIGINT and SIGTERM (main thread only); restore on exit."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    global _requested
    previous = {s: signal.signal(s, _handler) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        _requested = None


def _watch_parent(parent: int) -> None:
    while True:
        if os.getppid() != parent:  # re-parented: the study's main process is gone
            os._exit(128 + signal.SIGTERM)
        threading.Event().wait(PARENT_POLL_S)


def worker_init(parent: int | None = None) -> None:
    """Set up a worker process: SIGINT ignored, SIGTERM a stop request, exit when the parent dies."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _worker_handler)
    parent = os.getppid() if parent is None else parent
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="parent-watchdog").start()
