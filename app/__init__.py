"""Process-level pieces shared by the worker, the starter, the demo, tests and benchmarks."""
