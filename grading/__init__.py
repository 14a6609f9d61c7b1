"""Problems with known answers, and how an answer is graded: pure Python, no I/O beyond
reading a dataset file.

    grading.dataset   the JSONL dataset format: problems, loading, one-line errors
    grading.answers   reading a final answer out of a reply, and matching it
    grading.judge     the judge model's prompt and verdict, and the JudgeAnswers
                      workflow's input and output
    grading.sampling  self-consistency: how many samples, and the SelfConsistency
                      workflow's input and output

The evaluation harness scores with these, the JudgeAnswers workflow grades with them,
and the simulator plays solvers of known skill with them. Like council/, this package
imports nothing above it and is safe inside the workflow sandbox.
"""
