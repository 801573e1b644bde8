"""Test cases of the built-in op packs, one module per pack.

A pack names its module with ``OpPack(..., cases="oxport.opsets.cases.<family>")``;
the op-test runner imports it when it first asks for cases, so an export never
builds the test models.
"""
