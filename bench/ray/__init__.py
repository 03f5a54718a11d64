"""Ray benchmarks: driver overhead, two raylets with one killed mid-study."""
