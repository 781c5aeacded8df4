"""How honest the progress bar's ETA is: predicted against actual end of a study, read off the bar itself.

Runs ``sabo-bench run <study> --profile <profile> --workers <w>`` into a fresh runs directory
under a pseudo-terminal (so the bar is drawn as a user sees it), stops it with SIGINT after
``--stop-after`` seconds, then runs the same command again to the end: the resume, where an ETA
has finished records, checkpoints and the longest runs already behind it. Every redraw of the
bar gives a predicted end (its elapsed time + ETA); the script prints, for the resumed session
(and the first one, if not stopped), when the first ETA appeared, and the error
|predicted end - actual end| / actual end weighted by how long each reading was on screen, from
10% of the wall time on (mean and worst), then the predicted total against the actual one (and the
share of the work the bar showed) at 10, 25, 50, 75 and 90% of the wall time, with the machine's
load average at the start and the end. ``--code DIR`` imports ``replication`` from another
checkout (e.g. ``git archive <commit> | tar -x -C /tmp/old``), to compare ETAs on the same
machine: run the two alternately, since this machine's load changes the actual end. ``--keep
DIR`` keeps the session's records (their curves' time stamps show how each run progressed).

    python benchmarks/eta_accuracy.py                        # synthetic ci, 2 workers, stop at 40 s
    python benchmarks/eta_accuracy.py --code /tmp/old        # the same with another checkout's code
    python benchmarks/eta_accuracy.py --study bbob --profile quick --stop-after 0   # a whole quick profile
    python benchmarks/eta_accuracy.py --study image --profile full --earlier runs --redo 169 --stop-after 0

``--earlier DIR --redo K`` starts from a copy of the study's records under DIR (earlier sessions,
made under whatever load they had) less the K that finished last, which the session recomputes:
an ETA that leans on earlier records.
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time
from datetime import datetime
from pathlib import Path

from replication.engine import record_paths

ROOT = Path(__file__).resolve().parents[1]
# "[01:23<02:10" (tqdm's own ETA, before 2026-11-27) or "[01:23, ETA 02:10" (replication.eta), after the share
# of the work done ("  7% of the estimated work |...")
READING = re.compile(rb"(\d+)%[^|\n]*\|[^|\n]*\| \[(\d[\d:]*)(?:<|, ETA )([\d:?]+)")
POINTS = (0.1, 0.25, 0.5, 0.75, 0.9)  # fractions of the wall time at which the predicted total is printed


def seconds(clock: bytes) -> float | None:
    if b"?" in clock:
        return None
    value = 0
    for part in clock.split(b":"):
        value = 60 * value + int(part)
    return float(value)


def session(command: list[str], stop_after: float | None) -> tuple[float, list[tuple[float, float | None, int]]]:
    """(wall seconds, [(wall time of a redraw, predicted end or None, percent shown)]) of one run of ``command``
    under a pty."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 200, 0, 0))  # tqdm draws nothing 0 wide
    proc = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, start_new_session=True, cwd=ROOT)
    os.close(slave)
    t0, readings, interrupted = time.monotonic(), [], False
    while True:
        if stop_after is not None and not interrupted and time.monotonic() - t0 > stop_after:
            os.killpg(proc.pid, signal.SIGINT)
            interrupted = True
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            now = time.monotonic() - t0
            for match in READING.finditer(data):
                left = seconds(match.group(3))
                readings.append((now, None if left is None else now + left, int(match.group(1))))
        elif proc.poll() is not None:
            break
    proc.wait()
    os.close(master)
    return time.monotonic() - t0, readings


def score(total: float, readings) -> str:
    shown = [(t, end) for t, end, _ in readings if end is not None]
    first = f"{shown[0][0]:.1f} s" if shown else "never"
    start, weighted, span, worst = 0.1 * total, 0.0, 0.0, 0.0
    for (t, end, _), t_next in zip(readings, [t for t, _, _ in readings[1:]] + [total]):
        a, b = max(t, start), max(t_next, start)
        if b > a and end is not None:
            error = abs(end - total) / total
            weighted, span, worst = weighted + error * (b - a), span + b - a, max(worst, error)
    mean = f"{weighted / span:.0%}" if span else "n/a"
    return f"{total:.0f} s; first ETA after {first}; from 10% of the wall time on: mean error {mean}, worst {worst:.0%}"


def points(total: float, readings) -> str:
    """At each of :data:`POINTS` of the wall time, the reading then on screen: predicted total / actual - 1 and
    the share of the work the bar showed."""
    cells = []
    for fraction in POINTS:
        shown = [(end, percent) for t, end, percent in readings if t <= fraction * total]
        if not shown:
            cells.append(f"{fraction:.0%}: no reading")
            continue
        end, percent = shown[-1]
        error = "no ETA" if end is None else f"{end / total - 1:+.0%}"
        cells.append(f"{fraction:.0%}: {error} (bar {percent}%)")
    return "; ".join(cells)


def load() -> str:
    return "load average " + " ".join(f"{value:.1f}" for value in os.getloadavg())


def seed_runs(source: Path, target: Path, redo: int) -> None:
    """Copy ``source``'s records (and their COCO files) to ``target``, less the ``redo`` that finished last."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.ckpt", "*.lock", "*.error.txt"))
    records = record_paths(target)
    records.sort(key=lambda p: datetime.fromisoformat(json.loads(p.read_text())["provenance"]["finished_utc"]))
    for path in records[len(records) - redo:] if redo else []:
        path.unlink()
        shutil.rmtree(path.with_suffix(".files"), ignore_errors=True)
    print(f"started from {len(records) - redo} records of {source}; {redo} to recompute", flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--study", default="synthetic")
    ap.add_argument("--profile", default="ci")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--method", nargs="+", default=None)
    ap.add_argument("--stop-after", type=float, default=40.0, help="seconds before SIGINT (0: no stop)")
    ap.add_argument("--code", type=Path, default=ROOT, help="the checkout whose replication package runs")
    ap.add_argument("--earlier", type=Path, help="a runs directory whose records of the study the session starts with")
    ap.add_argument("--redo", type=int, default=0, help="with --earlier: recompute the K records that finished last")
    ap.add_argument("--keep", type=Path, help="copy the session's runs directory here at the end")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as runs:
        if args.earlier is not None:
            seed_runs(args.earlier / args.study, Path(runs) / args.study, args.redo)
        code = f"import sys; sys.path.insert(0, {str(args.code.resolve())!r}); from replication.cli import main; " \
               "sys.exit(main())"
        command = [sys.executable, "-c", code, "run", args.study, "--profile", args.profile, "--workers",
                   str(args.workers), "--runs-dir", runs, "--no-track", *(["--method", *args.method] if args.method
                                                                        else [])]
        print(f"code: {args.code}; {' '.join(command[3:])}; {load()}", flush=True)
        total, readings = session(command, args.stop_after or None)
        if args.stop_after:
            print(f"first session, stopped by SIGINT after {total:.0f} s; {load()}")
            total, readings = session(command, None)
            print(f"resumed session: {score(total, readings)}")
        else:
            print(f"uninterrupted session: {score(total, readings)}")
        print(f"predicted total / actual - 1 at fractions of the wall time: {points(total, readings)}")
        print(f"at the end: {load()}")
        if args.keep is not None:
            shutil.copytree(runs, args.keep, dirs_exist_ok=True)
            print(f"records kept in {args.keep}")


if __name__ == "__main__":
    main()
