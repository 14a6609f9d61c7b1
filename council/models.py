"""The deliberation request (validated), usage accounting, errors and the record."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from council import limits
from council.agreement import Agreement, AgreementTrend
from council.attachments import Attachment, AttachmentEntry, attachments_problem
from council.calls import ChatMessage, ModelCall, Stage, TokenUsage
from council.changes import NEW_WORD_RATIO
from council.depth import AutoOptions, Depth, Gate, NotNeeded, Saved
from council.ids import ModelId
from council.iteration import (
    DEFAULT_MAX_ROUNDS,
    DEFAULT_MIN_ROUNDS,
    DEFAULT_QUALITY_THRESHOLD,
    DEFAULT_TOKEN_BUDGET,
    IterationConfig,
    IterationRound,
    IterationSummary,
)
from council.report import DisagreementReport
from council.stages import (
    AggregateRanking,
    Stage1Result,
    Stage2_5Result,
    Stage2Result,
    Stage3Result,
)
from council.steering import SteeringAction
from council.stragglers import LateCall, StragglerPolicy
from council.structured import StructuredReply, schema_problem
from council.thread import (
    DEFAULT_CONTEXT_TOKENS,
    MAX_CONTEXT_TOKENS,
    ContextSummary,
    ThreadContext,
    Turn,
    fit_context,
    named_dropped,
)
from council.tools import ToolOptions, ToolSpec, ToolUse, tool_names_problem


class Criterion(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
    description: Annotated[str, StringConstraints(max_length=2000)] = ""


class EvaluationCriteria(BaseModel):
    """What reviewers judge answers on; the names reach the refinement prompt too."""

    model_config = ConfigDict(extra="forbid")

    criteria: list[Criterion] = Field(min_length=1, max_length=12)


class CallPolicy(BaseModel):
    """Timeouts and retries of every model call."""

    model_config = ConfigDict(extra="forbid")

    call_timeout_seconds: float = Field(
        default=300, ge=1, le=3600, description="seconds per model call attempt"
    )
    # The activity heartbeats every third of this (at most every 5 s) while a call runs.
    heartbeat_timeout_seconds: float = Field(
        default=10, ge=1, le=600, description="seconds without a heartbeat before a retry"
    )
    max_attempts: int = Field(default=6, ge=1, le=20, description="attempts per model call")
    initial_retry_seconds: float = Field(default=1, ge=0.1, le=60)
    max_retry_seconds: float = Field(default=30, ge=1, le=600)


ReplyTokenLimit = Annotated[
    int | None, Field(default=None, ge=limits.MIN_REPLY_TOKENS, le=limits.MAX_REPLY_TOKENS)
]


class ReplyTokens(BaseModel):
    """max_tokens of each stage's calls; None: the stage's default (council.limits)."""

    model_config = ConfigDict(extra="forbid")

    answer: ReplyTokenLimit = None
    review: ReplyTokenLimit = None
    refine: ReplyTokenLimit = None
    synthesis: ReplyTokenLimit = None


# The ReplyTokens field of each stage.
STAGE_TOKENS = {
    Stage.ANSWER: "answer",
    Stage.REVIEW: "review",
    Stage.REFINE: "refine",
    Stage.SYNTHESIS: "synthesis",
    Stage.CHECK: "review",
}


class DeliberationRequest(BaseModel):
    """A user's question and how the council should deliberate on it."""

    model_config = ConfigDict(extra="forbid")

    question: Annotated[
        str,
        StringConstraints(
            strip_whitespace=True, min_length=1, max_length=limits.QUESTION_MAX_CHARS
        ),
    ]
    models: list[ModelId] = Field(
        description=f"the council's models, {limits.MIN_MODELS} to {limits.MAX_MODELS}"
    )
    chairman: ModelId | None = Field(
        default=None, description="the model that writes the synthesis (default: the first)"
    )
    max_rounds: int = Field(
        default=DEFAULT_MAX_ROUNDS,
        ge=limits.MIN_ROUNDS,
        le=limits.MAX_ROUNDS,
        description="refinement rounds at most",
    )
    # At most max_rounds.
    min_rounds: int = Field(
        default=DEFAULT_MIN_ROUNDS,
        ge=0,
        le=limits.MAX_ROUNDS,
        description="refinement rounds that run whatever the ratings (0: only while a rating "
        "is low)",
    )
    quality_threshold: float = Field(
        default=DEFAULT_QUALITY_THRESHOLD,
        ge=limits.MIN_THRESHOLD,
        le=limits.MAX_THRESHOLD,
        description="another round runs while any peer rating (1-5) is below this",
    )
    token_budget: int = Field(
        default=DEFAULT_TOKEN_BUDGET,
        ge=1,
        le=limits.MAX_TOKEN_BUDGET,
        description="tokens of the whole run",
    )
    max_cost_usd: float | None = Field(
        default=None,
        gt=0,
        le=limits.MAX_COST_USD,
        description="USD, as the providers report it: the loop ends past 90 % of it",
    )
    stop_on_convergence: bool = Field(
        default=True, description="stop refining once no model changed its answer"
    )
    min_change_threshold: float = Field(
        default=NEW_WORD_RATIO,
        ge=0,
        le=1,
        description="the share of new words above which a refinement that reads much like "
        "the answer before it counts as a change",
    )
    criteria: EvaluationCriteria | None = Field(
        default=None, description="what reviewers judge answers on"
    )
    temperature: float | None = Field(
        default=None, ge=0, le=2, description="the temperature of every model call"
    )
    max_tokens: ReplyTokens = Field(
        default_factory=ReplyTokens,
        description="the token limit of a stage's replies (default: the stage's own, within "
        "the reply size cap)",
    )
    policy: CallPolicy = Field(default_factory=CallPolicy)
    # How long a stage waits for its late members once a quorum has replied.
    stragglers: StragglerPolicy = Field(default_factory=StragglerPolicy)
    # The user's standing instructions (a chat's system message): every member and the
    # chairman get them beside the question.
    instructions: (
        Annotated[
            str,
            StringConstraints(
                strip_whitespace=True, min_length=1, max_length=limits.INSTRUCTIONS_MAX_CHARS
            ),
        ]
        | None
    ) = None
    # A follow-up: the deliberation it follows, the thread's first one, and the thread's
    # earlier turns (oldest first), of which the prompts carry at most context_tokens.
    # A conversation a client brings (the chat API) has history without follow_up_of.
    # Whatever the thread's length, the request keeps only what fits (see _fit_history).
    follow_up_of: str | None = None
    thread_id: str | None = None
    history: list[Turn] = Field(default_factory=list)
    # Earlier turns left out (the oldest, which could not fit): the newest
    # MAX_THREAD_TURNS by id, oldest first, and how many older ones were left out unnamed.
    dropped_turns: list[str] = Field(default_factory=list)
    unnamed_dropped: int = Field(default=0, ge=0)
    context_tokens: int = Field(
        default=DEFAULT_CONTEXT_TOKENS,
        ge=0,
        le=MAX_CONTEXT_TOKENS,
        description="the earlier turns a follow-up carries, in tokens",
    )
    # The JSON Schema the final answer must follow (a client's response_format): the
    # chairman is asked for it, and its reply checked and repaired once.
    answer_format: StructuredReply | None = None
    # The user's files (council.attachments): every member, reviewer and the chairman is
    # shown them; within the limits of council.limits.
    attachments: list[Attachment] = Field(default_factory=list)
    # The tools the members may call (council.toml's [tools] entries, or the built-ins
    # fetch and web_search), and who uses them how much.
    tools: list[str] = Field(default_factory=list)
    tool_options: ToolOptions = Field(default_factory=ToolOptions)
    # Whether the council deliberates on every question (full) or only where its first
    # answers disagree (auto: council.depth), and auto's thresholds.
    depth: Depth = Field(
        default="full",
        description="full: the whole protocol on every question; auto: straight to the "
        "synthesis when the first answers agree, reviews stopped once the ranking is settled",
    )
    auto: AutoOptions = Field(default_factory=AutoOptions)

    @field_validator("tools")
    @classmethod
    def _tool_names(cls, names: list[str]) -> list[str]:
        problem = tool_names_problem(names)
        if problem:
            raise ValueError(problem)
        return names

    @field_validator("attachments")
    @classmethod
    def _attachments_within_limits(cls, attachments: list[Attachment]) -> list[Attachment]:
        problem = attachments_problem(attachments)
        if problem:
            raise ValueError(problem)
        return attachments

    @field_validator("models")
    @classmethod
    def _distinct_models(cls, models: list[str]) -> list[str]:
        if not limits.MIN_MODELS <= len(models) <= limits.MAX_MODELS:
            raise ValueError(
                f"need {limits.MIN_MODELS} to {limits.MAX_MODELS} models, got {len(models)}"
            )
        seen: set[str] = set()
        for model in models:
            if model in seen:
                raise ValueError(f"{model!r} is listed twice; models must be distinct")
            seen.add(model)
        return models

    @field_validator("min_rounds")
    @classmethod
    def _min_within_max(cls, min_rounds: int, info: ValidationInfo) -> int:
        max_rounds = info.data.get("max_rounds")
        if max_rounds is not None and min_rounds > max_rounds:
            raise ValueError(
                f"must be between 0 and {max_rounds}, the maximum rounds (got {min_rounds})"
            )
        return min_rounds

    @model_validator(mode="after")
    def _default_chairman(self) -> DeliberationRequest:
        if self.chairman is None:
            self.chairman = self.models[0]
        return self

    @field_validator("answer_format")
    @classmethod
    def _usable_format(cls, fmt: StructuredReply | None) -> StructuredReply | None:
        if fmt is None:
            return None
        if fmt.own is not None:
            raise ValueError("own: the council's own schemas are not an answer format")
        problem = schema_problem(fmt.json_schema)
        if problem:
            raise ValueError(problem)
        return fmt

    @model_validator(mode="after")
    def _thread(self) -> DeliberationRequest:
        if self.thread_id and not self.follow_up_of:
            raise ValueError("thread_id comes with follow_up_of (a follow-up)")
        if self.follow_up_of and not self.thread_id:
            self.thread_id = self.follow_up_of
        return self

    @model_validator(mode="after")
    def _fit_history(self) -> DeliberationRequest:
        """The earlier turns the request carries: those that fit context_tokens (a turn
        too long on its own is cut), the rest named or counted as dropped. Fitting again
        changes nothing, so a request read back from history is the request sent."""
        fitted = fit_context(self.history, self.context_tokens)
        dropped, unnamed = named_dropped(
            [*self.dropped_turns, *fitted.dropped], self.unnamed_dropped
        )
        self.history, self.dropped_turns, self.unnamed_dropped = fitted.turns, dropped, unnamed
        return self

    def user_texts(self) -> list[str]:
        """What every prompt carries of the user's own: the question, the instructions and
        the earlier turns (what a reply may repeat and still be an answer)."""
        turns = [text for turn in self.history for text in (turn.question, turn.answer)]
        return [self.question, self.instructions or "", *turns]

    def context(self) -> ThreadContext:
        """The earlier turns the prompts carry: the newest that fit in context_tokens."""
        fitted = fit_context(self.history, self.context_tokens)
        return fitted.model_copy(
            update={
                "dropped": [*self.dropped_turns, *fitted.dropped],
                "unnamed_dropped": self.unnamed_dropped,
            }
        )

    def iteration_config(self) -> IterationConfig:
        return IterationConfig(
            enabled=True,
            max_rounds=self.max_rounds,
            min_rounds=self.min_rounds,
            auto_stop_on_convergence=self.stop_on_convergence,
            min_change_threshold=self.min_change_threshold,
            quality_threshold=self.quality_threshold,
            context_budget=self.token_budget,
            max_cost_usd=self.max_cost_usd,
        )

    @property
    def response_byte_cap(self) -> int:
        """The largest reply of this run: small enough that the record fits even when the
        user raises the maximum rounds to the limit while the run goes on."""
        return limits.response_byte_cap(len(self.models), limits.MAX_ROUNDS)

    def reply_tokens(self, stage: Stage) -> int:
        """max_tokens of this stage's calls: as set, or the stage's default."""
        name = STAGE_TOKENS[stage]
        given = getattr(self.max_tokens, name)
        return given if given is not None else limits.reply_tokens(name, self.response_byte_cap)

    def model_call(
        self,
        stage: Stage,
        round_number: int,
        model: str,
        messages: list[ChatMessage],
        max_tokens: int | None = None,
        response_format: StructuredReply | None = None,
        tools: list[ToolSpec] | None = None,
    ) -> ModelCall:
        """One model call of this deliberation: its temperature, its reply size cap, and
        (where given) its token limit and the JSON schema of its reply."""
        return ModelCall(
            model=model,
            messages=messages,
            stage=stage,
            round=round_number,
            temperature=self.temperature,
            max_tokens=max_tokens,
            max_response_bytes=self.response_byte_cap,
            response_format=response_format,
            attachments=self.attachments,
            tools=tools or [],
        )

    def uses_tools(self, stage: Stage) -> bool:
        """Whether this stage's calls are offered the run's tools."""
        if not self.tools:
            return False
        if stage is Stage.REVIEW:
            return self.tool_options.reviewers
        if stage is Stage.SYNTHESIS:
            return self.tool_options.chairman
        return True


class UsageTotals(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    # The sum of the costs the providers reported; None when no call reported one.
    cost_usd: float | None = None
    calls: int = 0
    estimated_calls: int = 0
    # Calls whose provider reported no cost: cost_usd leaves them out.
    calls_without_cost: int = 0

    def add(self, usage: TokenUsage) -> None:
        """Count one call."""
        self.merge(
            UsageTotals(
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens,
                total_tokens=usage.total_tokens,
                cost_usd=usage.cost_usd,
                calls=1,
                estimated_calls=int(usage.estimated),
                calls_without_cost=int(usage.cost_usd is None),
            )
        )

    def merge(self, other: UsageTotals) -> None:
        """Add another set of totals to these (a cost stays None while neither has one)."""
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.total_tokens += other.total_tokens
        if other.cost_usd is not None:
            self.cost_usd = round((self.cost_usd or 0.0) + other.cost_usd, 10)
        self.calls += other.calls
        self.estimated_calls += other.estimated_calls
        self.calls_without_cost += other.calls_without_cost

    def totals(self) -> UsageTotals:
        """These figures alone (a Usage without its breakdowns)."""
        return UsageTotals.model_validate(self.model_dump(include=set(UsageTotals.model_fields)))

    def cost_line(self) -> str:
        """The cost for a person: "cost $0.0123", "cost not reported", or the sum with
        the calls it leaves out."""
        if self.cost_usd is None:
            return "cost not reported"
        missing = (
            f" ({self.calls_without_cost} call(s) reported no cost)"
            if self.calls_without_cost
            else ""
        )
        return f"cost ${self.cost_usd:.4f}{missing}"


class Usage(UsageTotals):
    """Every token the deliberation spent, as the providers reported it."""

    by_model: dict[str, UsageTotals] = Field(default_factory=dict)
    by_stage: dict[str, UsageTotals] = Field(default_factory=dict)
    by_provider: dict[str, UsageTotals] = Field(default_factory=dict)

    def record(
        self, model: str, stage: Stage, usage: TokenUsage, provider: str | None = None
    ) -> None:
        self.add(usage)
        self.by_model.setdefault(model, UsageTotals()).add(usage)
        self.by_stage.setdefault(stage.value, UsageTotals()).add(usage)
        if provider:
            self.by_provider.setdefault(provider, UsageTotals()).add(usage)


class CallError(BaseModel):
    """A model call that failed for good (after Temporal's retries)."""

    stage: Stage
    round: int
    model: str
    message: str
    error_type: str | None = None
    provider: str | None = None

    def describe(self) -> str:
        """One line that names the model once."""
        return (
            self.message if self.message.startswith(self.model) else f"{self.model}: {self.message}"
        )


class ToolCallEntry(ToolUse):
    """A tool call in the record: whose call asked for it, where in the protocol."""

    stage: Stage
    round: int
    model: str


class DeliberationRecord(BaseModel):
    """The workflow's result: the council's assistant message (stage1, stage2, stage2_5,
    stage3), extended with the rounds, the loop's summary, usage and errors."""

    role: Literal["assistant"] = "assistant"
    id: str
    query: str
    models: list[str]
    chairman: str
    # "failed": the record a failed run carries in its failure's details; "terminated":
    # the record a run whose workflow task kept failing had when a stop ended it.
    status: Literal["running", "completed", "failed", "terminated"] = "running"
    stage1: list[Stage1Result] = Field(default_factory=list)
    stage2: list[Stage2Result] = Field(default_factory=list)
    stage2_5: list[Stage2_5Result] | None = None
    stage3: Stage3Result | None = None
    label_to_model: dict[str, str] = Field(default_factory=dict)
    aggregate_rankings: list[AggregateRanking] = Field(default_factory=list)
    rounds: list[IterationRound] = Field(default_factory=list)
    iteration: IterationSummary = Field(default_factory=IterationSummary)
    usage: Usage = Field(default_factory=Usage)
    errors: list[CallError] = Field(default_factory=list)
    # Calls the straggler rule cut (council.stragglers), in the order they were cut.
    late: list[LateCall] = Field(default_factory=list)
    # How far the final review agreed (council.agreement), and agreement review by review
    # (the first review, then each round's): whether refinement raised it.
    agreement: Agreement | None = None
    agreement_trend: AgreementTrend | None = None
    # The agreement of stage2 (the first review); each round's is in rounds.
    stage2_agreement: Agreement | None = None
    stop_reason: str | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None
    follow_up_of: str | None = None
    thread_id: str | None = None
    context: ContextSummary | None = None
    steering: list[SteeringAction] = Field(default_factory=list)
    # Places of texts replaced by a marker to keep the record within Temporal's payload
    # limit (council.record.fit_record); absent when nothing was.
    elided: list[str] = Field(default_factory=list)
    # The user's files (name, type, size, SHA-256) and where each was cut to fit a
    # member's context window; absent when there were none.
    attachments: list[AttachmentEntry] = Field(default_factory=list)
    # The tools the members were given (council.tools), every tool call in the order they
    # were made, and the models that answered without tools (their provider takes none);
    # absent when the run had no tools.
    tools: list[str] = Field(default_factory=list)
    tool_calls: list[ToolCallEntry] = Field(default_factory=list)
    without_tools: list[str] = Field(default_factory=list)
    # The tools whose server could not say what it offers (each a line): not offered.
    tools_unavailable: list[str] = Field(default_factory=list)
    # The tools their entry's rules withhold (council.tool_config.withheld_lines: "calc__delete:
    # does not declare readOnlyHint; ..."): not offered.
    tools_withheld: list[str] = Field(default_factory=list)
    # The run's depth (council.depth); under auto, the agreement gate's verdict on the first
    # answers and the calls cancelled as not needed (absent when none).
    depth: Depth = "full"
    gate: Gate | None = None
    not_needed: list[NotNeeded] = Field(default_factory=list)
    # Depth auto, a run that went straight to the synthesis: what it spent against what the
    # full protocol would have (an estimate from its stage-1 calls).
    saved: Saved | None = None
    # Where the council agreed and where it did not (council.report), beside stage3.
    disagreement_report: DisagreementReport | None = None

    @model_serializer(mode="wrap")
    def _omit_absent_parts(self, handler: Any) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("stage2_5") is None:
            data.pop("stage2_5", None)
        for optional in (
            "elided",
            "attachments",
            "tools",
            "tool_calls",
            "without_tools",
            "tools_unavailable",
            "tools_withheld",
            "not_needed",
            "gate",
            "saved",
        ):
            if not data.get(optional):
                data.pop(optional, None)
        return data
