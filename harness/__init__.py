"""Developer tooling: the processes a local run needs, started and stopped one way.

    harness.processes         the dev server, the simulator and workers as subprocesses;
                              CPU time and peak memory of a process
    harness.simulator_client  the simulator's control API over HTTP
    harness.local             what `make demo` and `make eval` start around one run
    harness.local_eval        `make eval`: the bundled dataset through such a local council
    harness.stack             a whole stack for many runs: the chaos run, the benchmarks

Production needs none of it: the worker, the starter and the web page connect to
whatever Temporal server and model provider their settings name (app/).
"""
