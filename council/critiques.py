"""Who criticised whom: per-label critiques from the reviews (seed 000, seed 003)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from council.iteration import CritiqueItem
from council.labels import labels_shown_to
from council.reviews import ParsedReview, parse_review
from council.stages import Stage2Result


def severity(rating: float | None) -> str:
    if rating is None:
        return "medium"
    if rating <= 2:
        return "high"
    return "low" if rating >= 4 else "medium"


def _fields(review: Stage2Result | Mapping[str, Any]) -> tuple[str, str]:
    if isinstance(review, Stage2Result):
        return review.model, review.ranking
    return str(review.get("model", "")), str(review.get("ranking") or "")


def critiques_from_parsed(
    parsed_reviews: Iterable[tuple[str, ParsedReview]],
) -> dict[str, list[CritiqueItem]]:
    """Label -> the critiques aimed at that answer, from (reviewer, parsed review) pairs.

    For a caller that has parsed the reviews already: the workflow parses each review
    once, when it arrives, and builds the critiques from that.
    """
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
    stage2_results: Sequence[Stage2Result | Mapping[str, Any]],
    label_to_model: Mapping[str, str],
) -> dict[str, list[CritiqueItem]]:
    """Label -> the critiques aimed at that answer, each attributed to its reviewer.

    A reviewer is never shown its own answer, so anything it wrote about its own label
    (or about a label that does not exist) is dropped: no model receives its own review.
    """
    labels = dict(label_to_model)
    parsed = []
    for review in stage2_results:
        reviewer, text = _fields(review)
        parsed.append((reviewer, parse_review(text, labels_shown_to(reviewer, labels))))
    return critiques_from_parsed(parsed)
