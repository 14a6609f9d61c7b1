"""What each stage produces, as stored in the record (the assistant message's shapes)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from council.structured import Disagreement


class Ending(BaseModel):
    """How a stored reply ended: the provider's finish reason ("length": cut by the token
    limit) and whether the reply size cap cut it; and the provider that gave it, by its
    council.toml name ("default" for COUNCIL_LLM_BASE_URL's)."""

    finish_reason: str | None = None
    truncated: bool = False
    provider: str | None = None

    @property
    def cut_by_token_limit(self) -> bool:
        return self.finish_reason == "length"


class Stage1Result(Ending):
    model: str
    response: str


class Stage2Result(Ending):
    """One reviewer's review of the other answers."""

    model: str
    ranking: str = Field(description="the review text as the reviewer wrote it")
    parsed_ranking: list[str] = Field(default_factory=list, description="labels, best first")
    ratings: dict[str, float] = Field(default_factory=dict, description="label -> rating 1-5")
    ratings_inferred: bool = Field(
        default=False, description="the reviewer gave only a ranking; ratings come from positions"
    )
    presented_order: list[str] = Field(
        default_factory=list, description="the labels in the order the reviewer was shown them"
    )
    read_as: str = Field(
        default="text",
        description="how the review was read: json_schema or json_object (JSON asked for in "
        "that form), or text",
    )
    # Read once, as the review is stored (None in an older record: read when shown).
    critiques: dict[str, str] | None = Field(
        default=None, description="label -> the critique the review gives that answer"
    )
    written_out: str | None = Field(
        default=None, description="a review given as JSON, written out in the text form"
    )


class Stage2_5Result(BaseModel):
    model: str
    original_response: str
    peer_critiques: str
    corrected_response: str


class Stage3Result(Ending):
    model: str
    response: str
    # Where the council disagreed, as the chairman's structured synthesis gave it.
    disagreements: list[Disagreement] = Field(default_factory=list)
    # With a format asked for the final answer (DeliberationRequest.answer_format): why the
    # response does not follow it after one repair (None: it does, or none was asked).
    format_problem: str | None = None
    # Set when no model could write the synthesis (every call failed, or repeated its
    # prompt): the response is then the best-rated member's answer, and this says so.
    fallback: str | None = None


class AggregateRanking(BaseModel):
    """How the peers judged one model's answer in one review (self-reviews never count)."""

    model: str
    label: str
    average_rank: float | None = Field(default=None, description="lower is better")
    mean_rating: float | None = Field(default=None, description="1-5, higher is better")
    lowest_rating: float | None = Field(
        default=None, description="the lowest individual peer rating (the quality gate's figure)"
    )
    rankings_count: int = 0
    ratings_count: int = 0
