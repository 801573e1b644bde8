"""Export benchmarks (see README.md)."""
