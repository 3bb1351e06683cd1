"""Benchmarks of autoglm_graph: the entry points are listed in README.md."""
