"""Benchmarks: every figure is a ratio measured side by side in the same run.

    python -m bench [--quick] [--only NAME[,NAME]] [--profile]      (or `make bench`)

One module per benchmark (critical_path, throughput, growth, crash), the processes they
share in `stack`, the no-durability baseline in `plain_asyncio`, the bare-Temporal
baseline in `bare_workflow`/`bare_worker`, and the runner in `run`.
"""
