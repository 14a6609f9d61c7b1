"""The evaluation harness: run a dataset of problems with known answers through the council
and score every stage.

    evaluation.dataset   loading and validating a JSONL dataset
    evaluation.answers   reading a final answer out of a reply, and matching it (pure)
    evaluation.judge     the optional judge model for free-text answers (prompt, verdicts)
    evaluation.scoring   one problem's record -> what each model answered at each stage
    evaluation.runner    the deliberations: bounded concurrency, resumption
    evaluation.report    accuracy tables, report.json, raw outputs
    evaluation.plot      the PNG of accuracy by stage and round
    evaluation.outputs   report.json, the plot and raw outputs on disk
    evaluation.cli       `python starter.py eval DATASET.jsonl`
    evaluation.local     `make eval`: the above, starting the server, simulator and worker

Importing this package starts nothing and imports neither Temporal's client nor matplotlib.
"""
