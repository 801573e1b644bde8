"""The clone's root folder, which Python imports as the package ``oxport`` only from the
folder that holds a clone named ``oxport`` (the current folder comes first on
``sys.path``). The package itself lives in ``core/`` (with ``opsets/`` and ``plugins/``),
so it is loaded here in this module's place and ``import oxport`` / ``python -m oxport``
work there too. An installed oxport does not contain this file, and nothing else imports
it."""

import importlib.metadata
import importlib.util
import os
import sys


def _load_the_package_in_core() -> None:
    root = os.path.dirname(os.path.abspath(__file__))
    try:
        importlib.metadata.distribution("oxport")
    except importlib.metadata.PackageNotFoundError:
        raise ImportError(
            f"`import oxport` found the folder {root}, a clone of oxport's repository that "
            "is not installed: its op packs are found through the installed entry points. "
            f"Install it first: pip install torch==2.13.0 && pip install -e {root}"
        ) from None
    core = os.path.join(root, "core")
    spec = importlib.util.spec_from_file_location(
        __name__, os.path.join(core, "__init__.py"), submodule_search_locations=[core, root])
    package = importlib.util.module_from_spec(spec)
    sys.modules[__name__] = package
    spec.loader.exec_module(package)


if __name__ == "oxport":
    _load_the_package_in_core()
