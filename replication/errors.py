"""Errors shared by the studies."""
from __future__ import annotations


class ResourceUnavailable(Exception):
    """A model or data set a study needs is not here (offline, not cached, not prepared).

    The message names what is missing and how to supply it; the command line prints it
    without a traceback. Concrete errors also derive from the built-in type that fits
    (``FileNotFoundError``, ``RuntimeError``), so existing handlers keep working.
    """
