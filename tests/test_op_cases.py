"""Every built-in symbolic, tested numerically by the shared runner."""

from oxport import testing

test_builtin_symbolics = testing.op_tests(distribution="oxport")


def test_every_builtin_symbolic_has_a_case():
    registry = testing.registry_view()
    entries = testing.entries_of(registry, distribution="oxport")
    assert entries, "no built-in symbolics were loaded"
    missing = testing.missing_cases(registry, entries)
    assert not missing, "symbolics without a test case:\n" + "\n".join(missing)
