"""JSON from files that may be hostile: the nesting depth is bounded before the text is parsed.

``json.loads`` descends one level of Python recursion per ``[`` or ``{``, and so does every
function that walks the result (validation, :mod:`sabo.serialization`'s decoder, flattening for
tables): a file holding 100,000 nested brackets ends in ``RecursionError`` somewhere, a traceback
instead of a message. :func:`loads` therefore measures the nesting depth first and refuses, with
:class:`NestingTooDeep` (a ``ValueError``), a text nested more than ``max_depth`` levels
(:data:`MAX_DEPTH`, far below the interpreter's recursion limit and far above what this suite
writes: a run record or a saved state is nested about 6 levels). ``NaN`` and ``Infinity`` are
read as :func:`json.loads` reads them (records keep NaN).

The depth is measured without parsing, in one pass over the bytes with NumPy, a megabyte at a
time (memory bounded whatever the size): brackets count outside strings only, and a quote ends a
string unless an odd number of backslashes precedes it (JSON's escapes). Where the text is not
valid JSON the count may differ from the parser's only after the first invalid character, where
the parser stops anyway.
"""
from __future__ import annotations

import json

import numpy as np

#: The deepest nesting :func:`loads` accepts (levels of ``[`` and ``{``).
MAX_DEPTH = 100
_CHUNK = 1 << 20
_QUOTE, _BACKSLASH = ord('"'), ord("\\")
_STEP = np.zeros(256, dtype=np.int8)  # what each byte does to the depth outside strings
_STEP[[ord("["), ord("{")]], _STEP[[ord("]"), ord("}")]] = 1, -1


class NestingTooDeep(ValueError):
    """A JSON text nested deeper than allowed (refused before it is parsed)."""


def check_depth(data: bytes, max_depth: int = MAX_DEPTH) -> None:
    """Raise :class:`NestingTooDeep` if the JSON text ``data`` nests more than ``max_depth`` levels."""
    buffer = np.frombuffer(data, dtype=np.uint8)
    depth, in_string, backslashes = 0, 0, 0  # carried from one chunk to the next
    for start in range(0, buffer.size, _CHUNK):
        chunk = buffer[start:start + _CHUNK]
        quotes = chunk == _QUOTE
        is_backslash = chunk == _BACKSLASH
        if backslashes or is_backslash.any():  # a quote after an odd run of backslashes is escaped
            index = np.arange(chunk.size)
            # the last position at or before each one that is no backslash (the run before the chunk included)
            last_other = np.maximum.accumulate(np.where(is_backslash, -1 - backslashes, index))
            run_before = np.empty(chunk.size, dtype=np.int64)
            run_before[0] = backslashes
            run_before[1:] = index[:-1] - last_other[:-1]
            quotes &= run_before % 2 == 0
            backslashes = int(chunk.size - 1 - last_other[-1]) if is_backslash[-1] else 0
        inside = (np.cumsum(quotes, dtype=np.int64) + in_string) % 2 == 1  # a quote is no bracket
        levels = np.cumsum(np.where(inside, 0, _STEP[chunk]), dtype=np.int64) + depth
        if levels.max(initial=depth) > max_depth:
            at = start + int(np.argmax(levels > max_depth))
            raise NestingTooDeep(f"JSON nested more than {max_depth} levels deep (at byte {at}); refused before "
                                 "parsing")
        depth, in_string = int(levels[-1]), int(inside[-1])


def loads(data: bytes | bytearray | str, max_depth: int = MAX_DEPTH):
    """``json.loads(data)`` after :func:`check_depth`; ``ValueError`` for text that is too deep or not JSON."""
    raw = data.encode() if isinstance(data, str) else bytes(data)
    check_depth(raw, max_depth)
    return json.loads(raw)
