"""Test modules written for fact, at the shapes of common kernel benchmarks."""
