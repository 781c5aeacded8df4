"""The ``sabo-bench`` program: :func:`replication.cli.main`, or one line when the replication extra is missing.

``pip install sabo-bench`` installs the library (``sabo``, ``baselines``) with NumPy, SciPy and
pycma only. The command runs the studies, which need the ``replication`` extra (PyYAML, pydantic,
filelock, MLflow, DVC, ...): without it, any invocation, ``--help`` included, says so in one line
with exit status 2, instead of a traceback from the first import that fails.
"""
from __future__ import annotations

import sys

OWN_PACKAGES = ("sabo", "baselines", "replication")


def main() -> int:
    try:
        from replication import cli
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").split(".")[0]
        if not missing or missing in OWN_PACKAGES:  # our own code is broken: that traceback is the message
            raise
        print(f"error: sabo-bench runs the studies, which need the replication extra (no module named {missing!r} "
              "here): pip install 'sabo-bench[replication]'", file=sys.stderr)
        return 2
    return cli.main()


if __name__ == "__main__":
    sys.exit(main())
