"""The built-in ai.onnx op packs, one module per op family.

Each module exposes ``pack``, declared as an ``oxport`` entry point in the root
``pyproject.toml`` and loaded exactly like a third party's pack. Their test cases
live in :mod:`oxport.opsets.cases`, imported by the op-test runner only.
"""
