"""Command-line argument types with one-line refusals, shared by ``sabo-bench`` and the demo."""
from __future__ import annotations

import argparse
import math
from pathlib import Path

from .errors import one_line


class ArgumentParser(argparse.ArgumentParser):
    """argparse, with a bad argument reported as one line (``sabo-bench: error: ...``, exit status 2)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog.split()[0]}: error: {one_line(message)}\n")


def number(kind, rule: str, accept):
    """An argparse type: a finite ``kind`` (int or float) for which ``accept(value)`` holds, else the one-line
    refusal ``must be <rule> (got '<text>')``."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {rule} (got {text!r})") from None
        if not (math.isfinite(value) and accept(value)):
            raise argparse.ArgumentTypeError(f"must be {rule} (got {text!r})")
        return value
    return parse


def int_at_least(minimum: int):
    """An argparse type: an integer >= ``minimum``."""
    return number(int, f"an integer >= {minimum}", lambda value: value >= minimum)


def positive_int(text: str) -> int:
    """``--workers``, the demo's ``--dim``: an integer >= 1."""
    return int_at_least(1)(text)


def seed_int(text: str) -> int:
    """``--seed``: an integer >= 0."""
    return int_at_least(0)(text)


def positive_seconds(text: str) -> float:
    """``--checkpoint-every``: a finite number of seconds > 0."""
    return number(float, "a finite number of seconds > 0", lambda value: value > 0)(text)


def directory(text: str) -> str:
    """``--runs-dir``, ``--out``: a directory, or a path where one can be made (no file on the way)."""
    path = Path(text)
    for part in (path, *path.parents):
        if part.exists():
            if not part.is_dir():
                raise argparse.ArgumentTypeError(f"must be a directory, or a path where one can be made: "
                                                 f"{str(part)!r} is a file (got {text!r})")
            break
    return text
