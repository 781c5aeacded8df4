"""Local worker processes that outlive the loss of one of them.

Each worker runs one task at a time, sent over a pipe of its own; the parent waits on the pipes and
on the processes together (:func:`multiprocessing.connection.wait`), so it learns at once of a
result and of a worker that died. A worker that dies (SIGKILL, the kernel's out-of-memory killer, a
crash in native code) is replaced by a new one when there is work for it, and its task is handed
back to the caller (:data:`DIED`, with the exit code), which decides whether to queue it again; the
other workers go on undisturbed.

Why not :class:`concurrent.futures.ProcessPoolExecutor`: when one of its workers dies it marks the
whole pool broken, fails every pending future with ``BrokenProcessPool`` and terminates the other
workers, so a study stopped as a whole when one worker was killed. (``multiprocessing.Pool``
replaces a dead worker but never completes the task it held.)

Workers start with SIGINT blocked, inherited from the parent (:meth:`WorkerPool._spawn`), so that a
Ctrl-C of the terminal (sent to the whole process group) while they start up and import reaches
only the parent, which decides (:mod:`replication.stopping`); the pool's ``initializer`` sets up
the rest of a worker's signal handling.
"""
from __future__ import annotations

import collections
import contextlib
import pickle
import signal
import time
import traceback
from multiprocessing import resource_tracker
from multiprocessing.connection import wait as wait_for

RESULT, ERROR, DIED = "result", "error", "died"


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker (its ``__cause__`` in the parent)."""

    def __str__(self) -> str:
        return f"\n\"\"\"\n{self.args[0]}\"\"\""


def _serve(conn, initializer, initargs) -> None:
    """A worker's life: ``initializer(*initargs)``, then ``(key, fn, args)`` tasks from ``conn`` until
    None or the parent closes its end; each reply is ``(key, RESULT, value)`` or ``(key, ERROR,
    exception, traceback text)``. An initializer that raises answers the first task with its
    exception, and the worker ends."""
    try:
        initializer(*initargs)
        broken = None
    except BaseException as exc:
        broken = exc
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):  # the parent is gone, or stopped us
            return
        if task is None:
            return
        key, fn, args = task
        try:
            if broken is not None:
                raise broken
            reply = (key, RESULT, fn(*args))
        except BaseException as exc:  # the parent decides what it means
            reply = (key, ERROR, _portable(exc), "".join(traceback.format_exception(exc)))
        try:
            conn.send(reply)
        except (EOFError, OSError):  # the parent is gone, or stopped us
            return
        except Exception as exc:  # a result that does not pickle: what went wrong does
            conn.send((key, ERROR, RuntimeError(f"the task's result cannot be sent: {type(exc).__name__}: {exc}"), ""))
        if broken is not None:
            return


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling (it crosses a pipe), else a RuntimeError with its type and message."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


class _Worker:
    def __init__(self, process, conn):
        self.process, self.conn, self.task = process, conn, None


class WorkerPool:
    """``size`` worker processes of the multiprocessing context ``ctx``, each started with
    ``initializer(*initargs(slot))`` (``slot`` in 0..size-1: a replacement gets its predecessor's).

    :meth:`submit` queues tasks, :meth:`wait` hands them to idle workers (starting workers as
    needed) and returns what happened; :meth:`close` ends idle workers, :meth:`stop` busy ones.
    """

    def __init__(self, ctx, size: int, initializer, initargs):
        self._ctx, self._initializer, self._initargs = ctx, initializer, initargs
        self._slots: list[_Worker | None] = [None] * size
        self._queue: collections.deque = collections.deque()

    @property
    def pending(self) -> int:
        """Tasks queued or running."""
        return len(self._queue) + sum(w is not None and w.task is not None for w in self._slots)

    @property
    def processes(self) -> list:
        """The worker processes started and not known to have ended."""
        return [w.process for w in self._slots if w is not None]

    def submit(self, key, fn, args: tuple, *, first: bool = False) -> None:
        """Queue ``fn(*args)`` (picklable) under ``key``; ``first``: before the tasks queued already."""
        (self._queue.appendleft if first else self._queue.append)((key, fn, args))

    def wait(self, timeout: float) -> list[tuple]:
        """Start queued tasks on idle workers, then wait up to ``timeout`` seconds for running ones.

        Returns the events that happened, each ``(key, RESULT, value)``, ``(key, ERROR,
        exception)`` (the worker's traceback as the exception's ``__cause__``) or ``(key, DIED,
        exit code)`` (negative: killed by that signal).
        """
        self._dispatch()
        busy = [(slot, w) for slot, w in enumerate(self._slots) if w is not None and w.task is not None]
        if not busy:
            return []
        ready = set(wait_for([w.conn for _, w in busy] + [w.process.sentinel for _, w in busy], timeout))
        events = []
        for slot, worker in busy:
            if worker.conn not in ready and worker.process.sentinel not in ready:
                continue
            key, worker.task = worker.task, None
            try:
                if worker.conn.poll():
                    _, kind, value, *text = worker.conn.recv()
                    if kind == ERROR and text:
                        value.__cause__ = RemoteTraceback(text[0])
                    events.append((key, kind, value))
                    continue
            except (EOFError, OSError):  # it died, possibly halfway through sending its reply
                pass
            worker.process.join()
            worker.conn.close()
            self._slots[slot] = None
            events.append((key, DIED, worker.process.exitcode))
        self._dispatch()
        return events

    def close(self) -> None:
        """End the idle workers (call once no task is pending) and wait for them."""
        for worker in self._slots:
            if worker is not None:
                with contextlib.suppress(OSError):
                    worker.conn.send(None)
        for slot, worker in enumerate(self._slots):
            if worker is not None:
                worker.process.join()
                worker.conn.close()
                self._slots[slot] = None

    def stop(self, grace_s: float) -> None:
        """Drop queued tasks; SIGTERM every worker (a busy one ends its task as it handles that, then exits
        instead of sending a reply; an idle one exits), wait up to ``grace_s`` seconds in all, then kill
        those left."""
        self._queue.clear()
        workers = [w for w in self._slots if w is not None]
        self._slots = [None] * len(self._slots)
        for worker in workers:
            with contextlib.suppress(OSError):
                worker.conn.send(None)  # read after the task: no waiting for another one
            worker.conn.close()  # and a reply meets a closed pipe, rather than waiting for a reader
            if worker.process.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    worker.process.terminate()
        deadline = time.monotonic() + grace_s
        for worker in workers:
            worker.process.join(max(0.0, deadline - time.monotonic()))
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()

    def _dispatch(self) -> None:
        """Hand queued tasks to idle workers, starting one in each empty slot that gets a task."""
        for slot in range(len(self._slots)):
            if not self._queue:
                return
            worker = self._slots[slot]
            if worker is not None and worker.task is not None:
                continue
            if worker is None:
                worker = self._slots[slot] = self._spawn(slot)
            task = self._queue.popleft()
            try:
                worker.conn.send(task)
            except OSError:  # it died while idle: a new one takes the task
                self._queue.appendleft(task)
                worker.process.join()
                worker.conn.close()
                self._slots[slot] = None
                worker = self._slots[slot] = self._spawn(slot)
                worker.conn.send(self._queue.popleft())
            worker.task = task[0]

    def _spawn(self, slot: int) -> _Worker:
        parent_end, child_end = self._ctx.Pipe()
        process = self._ctx.Process(target=_serve, args=(child_end, self._initializer, self._initargs(slot)),
                                    name=f"sabo-bench-worker-{slot}")
        # the child inherits this thread's signal mask: SIGINT stays blocked there until its initializer
        # ignores it. Started first because starting it unblocks SIGINT in the calling thread.
        resource_tracker.ensure_running()
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            process.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)  # a Ctrl-C meanwhile is delivered now
        child_end.close()
        return _Worker(process, parent_end)
