"""The council's protocol as pure, deterministic Python: no Temporal, no I/O.

Safe to import inside the Temporal workflow sandbox. Import from the modules:

    council.calls       one model call: Stage, ModelCall, ModelReply, TokenUsage
    council.models      the request (validated), usage, errors, the record
    council.validation  one-line reasons for a request that must not start
    council.limits      size and range limits
    council.labels      anonymous labels and each reviewer's presentation order
    council.prompts     every prompt the council sends
    council.reviews     reading a review: ranking, ratings, critiques
    council.critiques   who criticised whom
    council.aggregate   aggregate rankings, mean and lowest ratings, a review's agreement, the
                        leader the outstanding reviews can no longer change
    council.agreement   Krippendorff's alpha, Kendall's W, dissents, the level, the verdict
    council.stragglers  the straggler rule: quorum, patience, late calls
    council.refinement  who refines, reading a refinement, what changed
    council.changes     change detection and the token estimate
    council.iteration   the loop's state and termination rules
    council.progress    the events a running deliberation reports
    council.record      record pieces derived from the rounds
    council.stages      what each stage produces
"""
