"""Who criticised whom: per-label critiques from the parsed reviews, with a severity
from the rating the reviewer gave."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from council.iteration import CritiqueItem
from council.reviews import ParsedReview, read_review


def severity(rating: float | None) -> str:
    if rating is None:
        return "medium"
    if rating <= 2:
        return "high"
    return "low" if rating >= 4 else "medium"


def critiques_from_parsed(
    parsed_reviews: Iterable[tuple[str, ParsedReview]],
) -> dict[str, list[CritiqueItem]]:
    """Label -> the critiques aimed at that answer, each attributed to its reviewer, from
    (reviewer, parsed review) pairs (council.reviews.read_review parses a review once,
    with only the labels its reviewer was shown: no model receives its own review)."""
    critiques: dict[str, list[CritiqueItem]] = {}
    for reviewer, parsed in parsed_reviews:
        for label, critique in parsed.critiques.items():
            rating = None if parsed.ratings_inferred else parsed.ratings.get(label)
            critiques.setdefault(label, []).append(
                CritiqueItem(
                    source_model=reviewer,
                    target_response=label,
                    critique_text=critique,
                    severity=severity(rating),
                    rating=rating,
                )
            )
    return critiques


def extract_critiques_from_rankings(
    stage2_results: Iterable[Mapping[str, Any]], label_to_model: Mapping[str, str]
) -> dict[str, list[CritiqueItem]]:
    """The specification's name for it: label -> critiques, from stage 2 results given as
    {"model": reviewer, "ranking": review text}; each review is read with the labels its
    reviewer was shown (every label but its own)."""
    labels = dict(label_to_model)
    return critiques_from_parsed(
        (result["model"], read_review(result["model"], result["ranking"], labels)[1])
        for result in stage2_results
    )
