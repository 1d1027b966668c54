"""Benchmarks: run with `make bench` (pytest-benchmark); figures go to extra_info."""
