"""Names that become path components: study, setting, method and problem names.

Run records live at ``runs/<study>/<setting>/<method>/<hash>.json`` (checkpoints beside them),
so each of these names must be one harmless path component: letters, digits, ``_``, ``-`` and
``.``, not starting with ``.`` (no ``..``, no hidden files), non-empty, at most
:data:`MAX_NAME_LENGTH` characters. ``params.yaml`` is checked against this rule by its schema
(:mod:`replication.params`) and :class:`replication.config.RunConfig` checks it again, so neither a
parameter file nor a programmatic or read-back config can make a path leave ``runs/``.
"""
from __future__ import annotations

import re

MAX_NAME_LENGTH = 64
NAME_RULE = "letters, digits, '_', '-', '.'; not starting with '.'"
_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")


def is_valid_name(value) -> bool:
    """True for a non-empty string of at most MAX_NAME_LENGTH characters following :data:`NAME_RULE`."""
    return (isinstance(value, str) and 0 < len(value) <= MAX_NAME_LENGTH
            and _NAME.fullmatch(value) is not None)


def name_problem(value) -> str:
    """Why ``value`` is not a valid name, in the words of an error message (assumes it is not)."""
    if isinstance(value, str) and len(value) > MAX_NAME_LENGTH:
        return f"is not a valid name (longer than {MAX_NAME_LENGTH} characters)"
    return f"is not a valid name ({NAME_RULE})"


def check_name(value, what: str) -> str:
    """``value`` if it is a valid name, else ``ValueError`` naming ``what`` (e.g. ``"RunConfig.setting"``)."""
    if not is_valid_name(value):
        raise ValueError(f"{what}: {value!r} {name_problem(value)}")
    return value


def natural_order(names) -> list[str]:
    """``names`` sorted with their runs of digits compared as numbers: f1, f2, ..., f10 (not f1, f10, f2)."""
    def key(name: str):
        return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", name) if part]
    return sorted(names, key=key)
