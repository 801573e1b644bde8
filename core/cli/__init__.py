"""The ``oxport`` command line: :mod:`oxport.cli.main` parses and dispatches, one module per
subcommand (``export``, ``doctor``, ``new_pack``; ``plugins`` and ``ops`` live in ``main``)."""

from oxport.cli.main import main

__all__ = ["main"]
