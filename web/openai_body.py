"""The body of /v1/chat/completions, read into a pydantic model: what each field may hold,
the conversation the messages make, and a refusal that names the field.

Rules:
- The fields the body model declares are the fields read; web.openai_options says what is
  done with every other one (accepted and ignored, or refused by name) before the body is
  read, and how response_format is read.
- The last user message is the question; the user and assistant messages before it are
  the conversation so far, as turns (a turn's id names the message it starts with); the
  system (and developer) messages are the user's instructions. Text parts of a message
  are read; a user message's `file` parts (file_data a data URL) and `image_url` parts
  (a data URL: the council fetches nothing) are the run's attachments (app.requests.attachments),
  in the order they come; any other part is refused, naming it. Their count is checked
  before any is decoded, each one's size before any is read; reading them (a PDF's text)
  is the caller's, apart from the event loop (Conversation.read_attachments).
- Input is bounded: the number of messages, each earlier message's text (the question's
  own bound is the request's: the front door checks it), and the number of turns.
- Every problem is a Refusal: the field's path as OpenAI names parameters
  (`messages[0].role`, `response_format.json_schema.name`), one line, and a code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SkipValidation,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from app.requests import attachments as reading
from council import limits
from council.attachments import Attachment, count_problem
from council.config import NOT_COUNCIL_OPTIONS
from council.structured import StructuredReply
from council.thread import Turn
from web.openai_options import OptionError, answer_format, check_stream_options

# However a client splits its conversation: the body's size bounds it, and the request
# keeps the newest turns that fit its context (council.thread).
MAX_MESSAGES = 10_000
# The most characters of a caller's end-user id.
MAX_USER_CHARS = 256
# An earlier answer as long as the longest a council can give.
ANSWER_MAX_CHARS = limits.MAX_RESPONSE_BYTES
TEXT_BOUNDS = {
    "system": limits.INSTRUCTIONS_MAX_CHARS,
    "user": limits.QUESTION_MAX_CHARS,
    "assistant": ANSWER_MAX_CHARS,
}
# developer is the newer name of the system role.
ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


class Refusal(ValueError):
    """A body the API refuses: one line, the field it names (None: the body as a whole)
    and OpenAI's error code."""

    def __init__(self, message: str, param: str | None = None, code: str = "invalid_request"):
        super().__init__(message)
        self.param = param
        self.code = code


def _refused(message: str, code: str = "invalid_request", param: str | None = None) -> Any:
    """A validator's refusal: `message` follows the field's path unless `param` names
    another field (then it is the whole line)."""
    return PydanticCustomError(code, "{message}", {"message": message, "param": param})


def path(loc: tuple[str | int, ...]) -> str:
    """A location as OpenAI names a parameter: messages[0].content, council.max_rounds."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


PARTS = "text, file (file_data a data URL) or image_url (a data URL)"


FILE_PARTS = ("file", "image_url")


def _field_of(kind: str) -> str:
    """Where a file part holds its data URL."""
    return "file.file_data" if kind == "file" else "image_url.url"


def _file_of(part: dict[str, Any], index: int) -> reading.Received:
    """The file of a file or image_url part, received (its size checked, not read yet;
    index: the part's, for its fallback name); a refusal naming the part's field."""
    kind = part["type"]
    inner = part.get(kind)
    field = _field_of(kind)
    if not isinstance(inner, dict):
        raise _refused(f".content[{index}].{kind} must be an object")
    url = inner.get("file_data") if kind == "file" else inner.get("url")
    name = inner.get("filename") if kind == "file" else None
    if not isinstance(url, str):
        raise _refused(f".content[{index}].{field} must be a data URL (data:TYPE;base64,...)")
    if name is not None and not isinstance(name, str):
        raise _refused(f".content[{index}].file.filename must be text")
    fallback = f"{'file' if kind == 'file' else 'image'}-{index + 1}"
    try:
        return reading.received_data_url(url, name, fallback)
    except reading.AttachmentProblem as problem:
        raise _refused(f".content[{index}].{field}{problem.text}") from None


def _file_parts(message: dict[str, Any]) -> int:
    """The file and image_url parts of a message as sent."""
    content = message.get("content")
    if not isinstance(content, list):
        return 0
    return sum(1 for part in content if isinstance(part, dict) and part.get("type") in FILE_PARTS)


class Message(BaseModel):
    """One message: its role as the council reads it, its text, and (a user message) the
    files it carries, with the index of each one's part and the field that holds it."""

    model_config = ConfigDict(extra="ignore")

    role: str
    text: str = Field(validation_alias="content")
    files: list[SkipValidation[reading.Received]] = Field(default_factory=list, exclude=True)
    file_parts: list[tuple[int, str]] = Field(default_factory=list, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _files(cls, data: Any) -> Any:
        """The file and image_url parts, read apart from the text."""
        if not isinstance(data, dict) or not isinstance(data.get("content"), list):
            return data
        texts: list[Any] = []
        files, where = [], []
        for index, part in enumerate(data["content"]):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind in FILE_PARTS and isinstance(part, dict):
                if data.get("role") != "user":
                    raise _refused(
                        f".content[{index}]: {kind} parts are read in user messages only"
                    )
                files.append(_file_of(part, index))
                where.append((index, _field_of(kind)))
            else:
                texts.append(part)
        return {**data, "content": texts, "files": files, "file_parts": where}

    @field_validator("role", mode="before")
    @classmethod
    def _role(cls, value: Any) -> str:
        role = ROLES.get(value) if isinstance(value, str) else None
        if role is None:
            raise _refused(
                f" must be system, developer, user or assistant (got {str(value)[:40]!r})",
                "invalid_role",
            )
        return role

    @field_validator("text", mode="before")
    @classmethod
    def _text(cls, content: Any) -> str:
        """A string, or a list of text parts."""
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            texts = []
            for part in content:
                kind = part.get("type") if isinstance(part, dict) else None
                if kind != "text" or not isinstance(part.get("text"), str):
                    shown = str(kind)[:40] if kind else "not a text part"
                    raise _refused(f": the parts read are {PARTS} (got {shown})")
                texts.append(part["text"])
            return "\n".join(texts)
        raise _refused(" must be text")


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = Field(False, strict=True)


@dataclass
class Conversation:
    """The messages as the council takes them."""

    question: str
    instructions: str | None
    history: list[Turn]
    # The user messages' files as received, in order, and where each came from
    # (messages[i].content[j]) and the field of it that holds the file.
    files: list[reading.Received]
    attachment_params: list[str]
    file_fields: list[str]
    # The files read (read_attachments).
    attachments: list[Attachment] = field(default_factory=list)

    async def read_attachments(self) -> None:
        """Read the files, apart from the event loop (app.requests.attachments); a Refusal naming
        the part of the first that cannot be read."""
        read = await reading.read_files_apart(self.files)
        for index, file in enumerate(read):
            if isinstance(file, reading.AttachmentProblem):
                where = self.attachment_params[index]
                raise Refusal(f"{where}.{self.file_fields[index]}{file.text}", where)
        self.attachments = [file for file in read if isinstance(file, Attachment)]


class ChatBody(BaseModel):
    """A chat-completions body, each field as the API reads it."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1)
    messages: list[Message] = Field(min_length=1, max_length=MAX_MESSAGES)
    stream: bool | None = Field(None, strict=True)
    stream_options: StreamOptions | None = None
    # The chairman's reply: max_tokens, or its newer name (one of them).
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    # Council options: numbers in them are read by the front door (app.requests.front_door).
    temperature: Any = None
    council: dict[str, Any] | None = None
    response_format: StructuredReply | None = None
    # Read with its neutral value only (web.openai_options.REFUSED): one answer.
    n: Any = None
    # The caller's end user (read and bounded, never its fairness key: web.guard.tenant is
    # who the run is for), and how urgent: `flex` for batch work that may wait.
    user: str | None = Field(None, strict=True, max_length=MAX_USER_CHARS)
    safety_identifier: str | None = Field(None, strict=True, max_length=MAX_USER_CHARS)
    service_tier: Literal["auto", "default", "flex", "scale", "priority"] | None = None

    @field_validator("stream_options", mode="before")
    @classmethod
    def _stream_options(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, dict):
            raise _refused(" must be an object")
        try:
            check_stream_options(value or {})
        except OptionError as refused:
            raise _refused(str(refused), param=refused.param) from None
        return value

    @field_validator("max_tokens", "max_completion_tokens", mode="before")
    @classmethod
    def _tokens(cls, value: Any) -> Any:
        low, high = limits.MIN_REPLY_TOKENS, limits.MAX_REPLY_TOKENS
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise _refused(f" must be between {low} and {high} (got {str(value)[:40]})")
        return value

    @field_validator("council", mode="before")
    @classmethod
    def _council(cls, options: Any) -> Any:
        if options is None:
            return None
        if not isinstance(options, dict):
            raise _refused(" must be an object of start options (max_rounds, ...)")
        if "answer_format" in options:
            raise _refused(
                "council.answer_format cannot be set here: response_format sets it",
                param="council.answer_format",
            )
        refused = sorted(set(options) & NOT_COUNCIL_OPTIONS)
        if refused:
            raise _refused(
                f"council.{refused[0]} cannot be set here: the messages carry the question, "
                "the conversation and the instructions",
                param=f"council.{refused[0]}",
            )
        return options

    @field_validator("response_format", mode="before")
    @classmethod
    def _format(cls, value: Any) -> Any:
        try:
            return answer_format(value)
        except OptionError as refused:
            raise _refused(str(refused), param=refused.param) from None

    @field_validator("messages", mode="before")
    @classmethod
    def _messages(cls, value: Any) -> Any:
        if not isinstance(value, list) or not value:
            raise _refused(" must be a non-empty list of {role, content} objects")
        if len(value) > MAX_MESSAGES:
            raise _refused(f": at most {MAX_MESSAGES} messages (got {len(value)})")
        for index, message in enumerate(value):
            if not isinstance(message, dict):
                raise _refused(
                    f"messages[{index}] must be an object with a role and a content",
                    param=f"messages[{index}]",
                )
        too_many = count_problem(sum(_file_parts(message) for message in value))
        if too_many:  # before any file is decoded
            raise _refused(f"attachments: {too_many}", param="messages")
        return value

    @model_validator(mode="after")
    def _one_token_limit(self) -> ChatBody:
        if self.max_tokens is not None and self.max_completion_tokens is not None:
            raise _refused(
                "max_tokens and max_completion_tokens: give one of them",
                param="max_completion_tokens",
            )
        return self

    @property
    def chairman_tokens(self) -> int | None:
        return self.max_tokens if self.max_tokens is not None else self.max_completion_tokens

    def conversation(self) -> Conversation:
        """The question, the instructions and the earlier turns; a Refusal when the
        messages do not make a conversation the council can take."""
        read = [(index, message.role, message.text) for index, message in enumerate(self.messages)]
        system = [text for _, role, text in read if role == "system" and text.strip()]
        chat = [item for item in read if item[1] != "system"]
        if not any(role == "user" for _, role, _ in chat):
            raise Refusal(
                "messages: no user message: the last message must be the question",
                "messages",
                "no_user_message",
            )
        if chat[-1][1] != "user":
            raise Refusal(
                f"messages: the last message must be the user's question (messages[{chat[-1][0]}] "
                "is the assistant's)",
                "messages",
                "invalid_role",
            )
        question = chat[-1]
        for index, role, text in read:
            bound = TEXT_BOUNDS[role]
            if index != question[0] and len(text) > bound:
                where = f"messages[{index}]"
                raise Refusal(
                    f"{where}.content is too long: at most {bound} characters (got {len(text)})",
                    where,
                )
        history = turns_of(chat[:-1])
        files = [file for message in self.messages for file in message.files]
        parts = [
            (f"messages[{i}].content[{j}]", kind)
            for i, message in enumerate(self.messages)
            for j, kind in message.file_parts
        ]
        return Conversation(
            question[2],
            "\n\n".join(system) or None,
            history,
            files,
            [param for param, _ in parts],
            [kind for _, kind in parts],
        )

    def options(self) -> dict[str, Any]:
        """The council's options this body sets: the `council` object, temperature, and
        the chairman's max_tokens."""
        options = dict(self.council or {})
        if self.temperature is not None:
            options["temperature"] = self.temperature
        tokens = self.chairman_tokens
        if tokens is not None:
            given = options.get("max_tokens") or {}
            options["max_tokens"] = (
                {**given, "synthesis": tokens} if isinstance(given, dict) else given
            )
        return options

    def param_of(self, loc: tuple[str | int, ...]) -> str:
        """The body's field where a request field at `loc` came from (a front door refusal)."""
        if loc[:1] in (("question",), ("instructions",), ("history",)):
            return "messages"
        if loc[:1] == ("attachments",):
            params = self.conversation().attachment_params
            index = loc[1] if len(loc) > 1 else None
            return params[index] if isinstance(index, int) and index < len(params) else "messages"
        if loc[:1] == ("temperature",) and self.temperature is not None:
            return "temperature"
        if loc[:2] == ("max_tokens", "synthesis") and self.chairman_tokens is not None:
            return "max_tokens" if self.max_tokens is not None else "max_completion_tokens"
        return path(("council", *loc))


def turns_of(messages: list[tuple[int, str, str]]) -> list[Turn]:
    """The earlier exchanges as turns: user messages, then the assistant messages that
    answer them. A turn's id names the message it starts with."""
    turns: list[Turn] = []
    start = 0
    asked: list[str] = []
    answered: list[str] = []
    for index, role, text in messages:
        if role == "user" and answered:
            turns.append(_turn(start, asked, answered))
            asked, answered = [], []
        if not asked and not answered:
            start = index
        (asked if role == "user" else answered).append(text)
    if asked or answered:
        turns.append(_turn(start, asked, answered))
    return turns


def _turn(start: int, asked: list[str], answered: list[str]) -> Turn:
    return Turn(id=f"messages[{start}]", question="\n\n".join(asked), answer="\n\n".join(answered))


def read_body(raw: dict[str, Any]) -> ChatBody:
    """The body, read; a Refusal naming the first field that cannot be read."""
    try:
        return ChatBody.model_validate(raw)
    except ValidationError as error:
        raise refusal(error) from None


def refusal(error: ValidationError) -> Refusal:
    first = error.errors()[0]
    loc = tuple(first["loc"])
    ctx = first.get("ctx") or {}
    where = path(loc) or None
    if ctx.get("param"):  # a line of its own that names its field
        return Refusal(str(ctx["message"]), str(ctx["param"]), first["type"])
    if "message" in ctx:
        return Refusal(f"{where}{ctx['message']}", where, first["type"])
    if loc == ("model",) and first["type"] in ("missing", "string_too_short", "string_type"):
        return Refusal("model is required: council or council/NAME (GET /v1/models)", "model")
    if first["type"] == "missing":
        return Refusal(f"{where} is required", where)
    if first["type"] == "bool_type":
        return Refusal(f"{where} must be true or false", where)
    message = " ".join(str(first["msg"]).split())
    return Refusal(f"{where}: {message}", where)
