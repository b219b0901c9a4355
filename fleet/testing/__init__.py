"""Internal: helpers for this repository's tests and benchmarks (a single-op harness, parameter
servers as processes, NumPy references of the update rules, running example scripts). Not part
of Fleet's API and not shipped in the wheel (pyproject.toml excludes the package); import it
only from tests/ and benchmarks/ in a source checkout."""
