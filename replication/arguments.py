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


def _number(text: str, kind, minimum, rule: str):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {rule} (got {text!r})") from None
    if not (math.isfinite(value) and value >= minimum) or (kind is float and value == 0):
        raise argparse.ArgumentTypeError(f"must be {rule} (got {text!r})")
    return value


def positive_int(text: str) -> int:
    """``--workers``, the demo's ``--dim``: an integer >= 1."""
    return _number(text, int, 1, "an integer >= 1")


def int_at_least(minimum: int):
    """An argparse type: an integer >= ``minimum``."""
    def parse(text: str) -> int:
        return _number(text, int, minimum, f"an integer >= {minimum}")
    return parse


def seed_int(text: str) -> int:
    """``--seed``: an integer >= 0."""
    return _number(text, int, 0, "an integer >= 0")


def positive_seconds(text: str) -> float:
    """``--checkpoint-every``: a finite number of seconds > 0."""
    return _number(text, float, 0, "a finite number of seconds > 0")


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
