"""Search benchmarks: NB201 tables, search quality, successive halving, search spaces."""
