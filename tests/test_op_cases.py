"""Every built-in symbolic, tested numerically by the shared runner."""

from oxport import testing

# Traced only unless OXPORT_TEST_FRONT_ENDS says more: through torch.export as well the
# built-in cases take twice as long (python -m benchmarks.export_cases measures them there).
test_builtin_symbolics = testing.op_tests(distribution="oxport",
                                          front_ends=testing.front_ends_from_environment())


def test_every_builtin_symbolic_has_a_case():
    registry = testing.registry_view()
    entries = testing.entries_of(registry, distribution="oxport")
    assert entries, "no built-in symbolics were loaded"
    missing = testing.missing_cases(registry, entries)
    assert not missing, "symbolics without a test case:\n" + "\n".join(missing)
