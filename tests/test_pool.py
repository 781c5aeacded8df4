"""The local worker pool: a worker that dies is replaced and its task handed back; the others go on."""
import multiprocessing
import operator
import os

import pytest

from replication.pool import DIED, ERROR, RESULT, RemoteTraceback, WorkerPool

CTX = multiprocessing.get_context("spawn")


def drain(pool, timeout=120.0):
    events = {}
    while pool.pending:
        for key, kind, value in pool.wait(timeout):
            events[key] = (kind, value)
    return events


@pytest.fixture
def pool():
    made = WorkerPool(CTX, 2, int, lambda slot: ())
    yield made
    made.stop(5.0)


def test_a_dead_worker_is_replaced_and_its_task_handed_back_while_the_others_go_on(pool):
    """``os.abort`` kills its worker (SIGABRT) as the out-of-memory killer's SIGKILL would; a task submitted
    after it runs in the replacement, and the other worker's tasks are untouched."""
    pool.submit("dies", os.abort, ())
    for i in range(4):
        pool.submit(f"sum{i}", operator.add, (i, 10))
    events = drain(pool)
    assert events.pop("dies") == (DIED, -6)
    assert events == {f"sum{i}": (RESULT, i + 10) for i in range(4)}
    first = {p.pid for p in pool.processes}
    pool.submit("pid", os.getpid, ())
    pool.submit("again", operator.add, (1, 1), first=True)
    events = drain(pool)
    assert events["again"] == (RESULT, 2) and events["pid"][1] in first  # no new worker needed
    assert len(pool.processes) == 2


def test_an_exception_comes_back_with_the_workers_traceback(pool):
    pool.submit("zero", operator.truediv, (1, 0))
    kind, exc = drain(pool)["zero"]
    assert kind == ERROR and isinstance(exc, ZeroDivisionError)
    assert isinstance(exc.__cause__, RemoteTraceback) and "ZeroDivisionError: division by zero" in str(exc.__cause__)


def test_a_failing_initializer_answers_the_first_task_with_its_exception():
    pool = WorkerPool(CTX, 1, operator.truediv, lambda slot: (1, 0))
    try:
        pool.submit("first", operator.add, (1, 2))
        kind, exc = drain(pool)["first"]
        assert kind == ERROR and isinstance(exc, ZeroDivisionError)
    finally:
        pool.stop(5.0)
