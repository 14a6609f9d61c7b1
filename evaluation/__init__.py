"""The evaluation harness: run a dataset of problems with known answers through the council
and score every stage.

    evaluation.plan      what a run will do: its problems, settings and workflow ids
    evaluation.scoring   one problem's record -> what each model answered at each stage
    evaluation.runner    the deliberations: bounded concurrency, resumption
    evaluation.report    accuracy tables, report.json, raw outputs
    evaluation.plot      the PNGs of accuracy by stage and round and by agreement level
    evaluation.outputs   report.json, the plots and raw outputs on disk
    evaluation.cli       `bin/council eval DATASET.jsonl`

`make eval` runs the above with a local stack around it (harness.local_eval): that part is
development tooling and stays in the checkout; the installed `council eval` talks to the
Temporal server and providers its settings name.

The dataset format, answer reading and the judge's prompt live in grading/ (used by the
simulator and the JudgeAnswers workflow too). Importing this package starts nothing and
imports neither Temporal's client nor matplotlib.
"""
