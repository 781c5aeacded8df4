"""JSON nested too deep for the interpreter is refused before it is parsed (sabo.bounded_json)."""
import json
import random

import pytest

import sabo.bounded_json as bounded_json
from sabo.bounded_json import MAX_DEPTH, NestingTooDeep, check_depth, loads


def depth(node) -> int:
    if isinstance(node, (list, dict)):
        return 1 + max(map(depth, node.values() if isinstance(node, dict) else node), default=0)
    return 0


def random_tree(rng, level=0):
    """Lists, objects and strings full of what a depth count could mistake for structure: brackets inside
    strings, escaped quotes, runs of backslashes before a quote."""
    roll = rng.random()
    if level > 8 or roll < 0.3:
        return rng.choice([1, 2.5, None, True, "a\"[b\\", "\\", "\\\\\"{", "x]}", "", "\\\\", float("nan"), "ü{"])
    if roll < 0.65:
        return [random_tree(rng, level + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(["k", "[", "\\\"", "}"]) + str(i): random_tree(rng, level + 1) for i in range(rng.randint(0, 4))}


def test_the_depth_is_exactly_the_parsers_wherever_the_chunks_end(monkeypatch):
    """A text of depth D passes at max_depth D and is refused at D - 1, with chunks of 1, 2, 3 and 7 bytes too
    (a string, an escape or a run of backslashes cut between two chunks)."""
    rng = random.Random(0)
    for _ in range(500):
        tree = random_tree(rng)
        text = json.dumps(tree, indent=rng.choice([None, 1]), ensure_ascii=rng.random() < 0.5).encode()
        monkeypatch.setattr(bounded_json, "_CHUNK", rng.choice([1, 2, 3, 7, 1 << 20]))
        d = depth(tree)
        check_depth(text, d)
        if d:
            with pytest.raises(NestingTooDeep):
                check_depth(text, d - 1)


@pytest.mark.parametrize("text", [b"[" * 100_000 + b"]" * 100_000,
                                  b'{"a": ' * 100_000 + b"1" + b"}" * 100_000,
                                  b"[" * 100_000])  # unterminated: refused before the parser finds that out
def test_json_nested_100000_deep_is_refused_in_one_line(text):
    with pytest.raises(NestingTooDeep, match=rf"^JSON nested more than {MAX_DEPTH} levels deep \(at byte \d+\)"):
        loads(text)


def test_what_is_not_too_deep_reads_as_json_loads_reads_it():
    inner = MAX_DEPTH - 1  # inside the object
    text = '{"nan": NaN, "inf": -Infinity, "s": "[[[\\"", "deep": ' + "[" * inner + "]" * inner + "}"
    assert repr(loads(text)) == repr(json.loads(text))
    with pytest.raises(ValueError):
        loads(b"{garbled")
