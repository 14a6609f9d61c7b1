"""Why a model call failed, and how Temporal should treat it.

The HTTP side raises CallFailure (no Temporal in it); the activity turns it into an
ApplicationError with a stable `type`, one line naming the model, and the retry rule:
429 waits for Retry-After, transient causes retry with Temporal's backoff, the client
errors never retry, and malformed or empty replies retry a bounded number of times.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from enum import StrEnum
from http import HTTPStatus
from typing import Any

from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from council import numbers


class ErrorType(StrEnum):
    RATE_LIMITED = "RateLimited"
    PROVIDER_UNAVAILABLE = "ProviderUnavailable"
    TIMEOUT = "Timeout"
    CONFLICT = "Conflict"
    CONNECTION_FAILED = "ConnectionFailed"
    TRUNCATED_STREAM = "TruncatedStream"
    MALFORMED_RESPONSE = "MalformedResponse"
    EMPTY_CONTENT = "EmptyContent"
    WORKER_SHUTDOWN = "WorkerShutdown"
    BAD_REQUEST = "BadRequest"
    UNAUTHORIZED = "Unauthorized"
    PAYMENT_REQUIRED = "PaymentRequired"
    FORBIDDEN = "Forbidden"
    MODEL_NOT_FOUND = "ModelNotFound"
    PAYLOAD_TOO_LARGE = "PayloadTooLarge"
    UNPROCESSABLE = "Unprocessable"
    CLIENT_ERROR = "ClientError"
    UNEXPECTED_STATUS = "UnexpectedStatus"
    BAD_CONFIGURATION = "BadConfiguration"
    CONTEXT_TOO_LONG = "ContextTooLong"
    # The provider is down and the call paused itself until it answers (activities.outage).
    PROVIDER_DOWN = "ProviderDown"


NON_RETRYABLE = frozenset(
    {
        ErrorType.BAD_REQUEST,
        ErrorType.UNAUTHORIZED,
        ErrorType.PAYMENT_REQUIRED,
        ErrorType.FORBIDDEN,
        ErrorType.MODEL_NOT_FOUND,
        ErrorType.PAYLOAD_TOO_LARGE,
        ErrorType.UNPROCESSABLE,
        ErrorType.CLIENT_ERROR,
        ErrorType.UNEXPECTED_STATUS,
        ErrorType.BAD_CONFIGURATION,
        ErrorType.CONTEXT_TOO_LONG,
    }
)
# Error types a workflow may list in its RetryPolicy.non_retryable_error_types.
NON_RETRYABLE_ERROR_TYPES = sorted(t.value for t in NON_RETRYABLE)

# A malformed or empty reply is retried, but not forever: from this attempt on it is final.
FLAKY = frozenset({ErrorType.MALFORMED_RESPONSE, ErrorType.EMPTY_CONTENT})
FLAKY_FINAL_ATTEMPT = 3

_STATUS_TYPES = {
    400: ErrorType.BAD_REQUEST,
    401: ErrorType.UNAUTHORIZED,
    402: ErrorType.PAYMENT_REQUIRED,
    403: ErrorType.FORBIDDEN,
    404: ErrorType.MODEL_NOT_FOUND,
    408: ErrorType.TIMEOUT,
    409: ErrorType.CONFLICT,
    413: ErrorType.PAYLOAD_TOO_LARGE,
    422: ErrorType.UNPROCESSABLE,
    425: ErrorType.PROVIDER_UNAVAILABLE,
    429: ErrorType.RATE_LIMITED,
}
# Error codes some providers put in an error body instead of an HTTP status.
_CODE_STATUSES = {
    "rate_limit_exceeded": 429,
    "context_length_exceeded": 400,
    "invalid_request_error": 400,
    "invalid_api_key": 401,
    "model_not_found": 404,
    "insufficient_quota": 402,
}

DEFAULT_RATE_LIMIT_DELAY = 5.0
MIN_RETRY_DELAY = 1.0
MAX_RETRY_DELAY = 300.0
MESSAGE_LIMIT = 500


class CallFailure(Exception):
    """A failed model call, before it is named for Temporal."""

    def __init__(
        self,
        kind: ErrorType,
        detail: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        ask_unstreamed: bool = False,
    ) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail
        self.status = status
        self.retry_after = retry_after
        # A stream that gave no whole reply (no data, a cut, a connection closed before
        # the reply): worth asking again at once without streaming.
        self.ask_unstreamed = ask_unstreamed


def error_type_for_status(status: int) -> ErrorType:
    if status in _STATUS_TYPES:
        return _STATUS_TYPES[status]
    if status >= 500:
        return ErrorType.PROVIDER_UNAVAILABLE
    if 400 <= status < 500:
        return ErrorType.CLIENT_ERROR
    return ErrorType.UNEXPECTED_STATUS


def one_line(text: str, limit: int = MESSAGE_LIMIT) -> str:
    line = re.sub(r"\s+", " ", text).strip()
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def describe_error_object(error: Any) -> str:
    """The provider's own words from an error value: OpenRouter's {"code", "message",
    "metadata": {"provider_name", "raw"}}, OpenAI's {"message", "type"}, or a string."""
    if not isinstance(error, dict):
        return _text(error)
    message = _text(error.get("message")) or _text(error.get("detail"))
    metadata = error.get("metadata")
    if isinstance(metadata, dict):
        provider = metadata.get("provider_name")
        raw = _text(metadata.get("raw"))
        if raw and raw not in message:
            message = f"{message} ({one_line(raw, 200)})" if message else raw
        if provider:
            message = f"{message} [upstream: {provider}]"
    return message or _text(error)


def provider_message(body: bytes | str) -> str:
    """The error message inside an error response body, whatever its dialect."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested too deeply to read
        return one_line(text, 300)
    if isinstance(data, dict):
        for key in ("error", "message", "detail"):
            if data.get(key):
                return one_line(describe_error_object(data[key]), 400)
    return one_line(text, 300)


def status_of_error_object(error: Any, default: int) -> int:
    """The HTTP-like status an error object carries (OpenRouter's numeric code)."""
    if isinstance(error, dict):
        code = error.get("code")
        if isinstance(code, int) and not isinstance(code, bool):
            return code
        if isinstance(code, str) and numbers.whole(code, signed=False) is not None:
            return int(code)
        if isinstance(code, str) and code in _CODE_STATUSES:
            return _CODE_STATUSES[code]
        if isinstance(error.get("type"), str) and error["type"] in _CODE_STATUSES:
            return _CODE_STATUSES[error["type"]]
    return default


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After value: delta seconds or an HTTP date."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    seconds = numbers.decimal(value)
    if seconds is not None:
        return max(0.0, seconds)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def retry_after_from_headers(headers: Any, now: datetime | None = None) -> float | None:
    """Retry-After, or the millisecond variant some OpenAI-compatible servers send."""
    seconds = parse_retry_after(headers.get("retry-after"), now)
    if seconds is None:
        millis = numbers.decimal(headers.get("retry-after-ms"))
        seconds = None if millis is None else max(0.0, millis / 1000)
    return seconds


def clamp_delay(seconds: float) -> float:
    return min(MAX_RETRY_DELAY, max(MIN_RETRY_DELAY, seconds))


# How providers say a prompt does not fit the context window (OpenAI's code, llama.cpp's
# and vLLM's words): one error type, whichever way the call was made.
_CONTEXT_WORDS = re.compile(
    r"context_length_exceeded|maximum context length|context (?:window|length) (?:of|is)"
    r"|exceeds? the context|too many tokens|prompt is too long",
    re.IGNORECASE,
)


def context_overflow(message: str) -> bool:
    return bool(_CONTEXT_WORDS.search(message))


def status_failure(
    status: int, body: bytes | str, retry_after: float | None = None, host: str = ""
) -> CallFailure:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    origin = f" from {host}" if host else ""
    said = provider_message(body) or "no error message"
    raw = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    if 400 <= status < 500 and context_overflow(raw):
        return CallFailure(
            ErrorType.CONTEXT_TOO_LONG,
            f"HTTP {status}{origin}: the prompt does not fit the model's context window: {said}",
            status=status,
        )
    return CallFailure(
        error_type_for_status(status),
        f"HTTP {status}{' ' + phrase if phrase else ''}{origin}: {said}",
        status=status,
        retry_after=retry_after,
    )


def application_error(failure: CallFailure, model: str, attempt: int) -> ApplicationError:
    """The error Temporal sees: a stable type, one line, and the retry rule."""
    kind = failure.kind
    non_retryable = kind in NON_RETRYABLE
    detail = failure.detail
    if kind in FLAKY and attempt >= FLAKY_FINAL_ATTEMPT:
        non_retryable = True
        detail = f"{detail} (attempt {attempt}; not retried further)"
    delay = None
    if kind is ErrorType.RATE_LIMITED:
        wait = failure.retry_after if failure.retry_after is not None else DEFAULT_RATE_LIMIT_DELAY
        delay = timedelta(seconds=clamp_delay(wait))
    elif failure.retry_after is not None and not non_retryable:
        delay = timedelta(seconds=clamp_delay(failure.retry_after))
    return ApplicationError(
        one_line(f"{model}: {detail}"),
        type=kind.value,
        non_retryable=non_retryable,
        next_retry_delay=delay,
        # Expected (a model failing is not a bug of the worker): the SDK logs it at DEBUG.
        category=ApplicationErrorCategory.BENIGN,
    )
