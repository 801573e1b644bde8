"""Runs only in the layout trap: ``python -m oxport`` from the folder above a clone of this
repository, where Python imports the clone folder as an empty namespace package ``oxport``
(the package itself lives in ``core/`` and becomes ``oxport`` only once installed). Say what
happened instead of failing obscurely. An installed oxport never contains this file."""

import os
import sys

sys.exit(
    f"oxport: error: Python imported the folder {os.path.dirname(os.path.abspath(__file__))} "
    "(a clone of oxport's repository) as an empty namespace package named 'oxport', because "
    "the current folder holds it; `import oxport` there gives the same empty package, without "
    "oxport.export. The package lives in the clone's core/ folder and is importable once "
    "installed (pip install -e <clone>): run Python from any other folder, or rename the clone.")
