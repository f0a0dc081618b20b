"""The errors a call may raise.

Every error answer of the gateway is an :class:`APIError`, of the subclass
for its code (``NotFoundError`` for not_found, ...). A refused
precondition is a :class:`ConflictError` carrying the target's current
state version and, for ``if_synced``, the caller's pending notice (its text
and its data). A
request that could not be sent, or whose answer did not arrive, is a
:class:`TransportError`. An answer that cannot be the gateway's (a proxy's
login page at a wrong base URL, say) is an :class:`APIError` with an empty
``code``.
"""

from __future__ import annotations

import email.utils
import json
import time
from email.message import Message
from typing import Any, Optional

from .types import NoticeData, decode


class VigilError(Exception):
    """Every error of this package."""


class TransportError(VigilError):
    """The gateway could not be reached, or the connection failed."""


class APIError(VigilError):
    """An error answer of the gateway; nothing stored was changed.

    ``status`` is the HTTP status, ``code`` the gateway's code (empty when
    the answer was not the gateway's JSON), ``message`` what it said (it
    names the field or rule at fault; "HTTP 404: not_found" when it gave a
    code without a message), ``retry_after`` the seconds the gateway asked
    to wait (answers 429 and 503; at most MAX_RETRY_AFTER, which a stream
    waits before reconnecting), ``request_id`` the id of the gateway's log
    line holding the details of a failure of its own (500, a failed
    store's 503) or None, ``op`` what was asked.
    """

    code_name = ""

    def __init__(self, op: str, status: int, code: str, message: str, retry_after: Optional[float] = None,
                 request_id: Optional[str] = None):
        super().__init__(f"vigil: {op}: {message}")
        self.op, self.status, self.code, self.message, self.retry_after = op, status, code, message, retry_after
        self.request_id = request_id


class InvalidArgumentError(APIError):
    code_name = "invalid_argument"


class UnauthenticatedError(APIError):
    code_name = "unauthenticated"


class PermissionDeniedError(APIError):
    code_name = "permission_denied"


class NotFoundError(APIError):
    code_name = "not_found"


class RequestTimeoutError(APIError):
    code_name = "request_timeout"


class ConflictError(APIError):
    """A 409: a precondition was refused (``precondition`` is then True and
    ``state_version`` the target's version), or a label or compaction was
    already taken. Reconcile with session_status(changes_since=...), decide
    again, and retry with if_state_version=state_version."""

    code_name = "conflict"

    def __init__(self, op: str, status: int, code: str, message: str, retry_after: Optional[float] = None,
                 state_version: Optional[int] = None, notice: str = "", notice_data: Any = None):
        super().__init__(op, status, code, message, retry_after)
        self.precondition = state_version is not None
        self.state_version = state_version or 0
        self.notice = notice
        #: The notice as data (a types.NoticeData), None when none is pending.
        self.notice_data = notice_data


class PayloadTooLargeError(APIError):
    code_name = "payload_too_large"


class TooManyRequestsError(APIError):
    code_name = "too_many_requests"


class InternalError(APIError):
    code_name = "internal"


class UnavailableError(APIError):
    code_name = "unavailable"


_BY_CODE = {c.code_name: c for c in (InvalidArgumentError, UnauthenticatedError, PermissionDeniedError,
                                     NotFoundError, RequestTimeoutError, ConflictError, PayloadTooLargeError,
                                     TooManyRequestsError, InternalError, UnavailableError)}


#: The longest wait an APIError's ``retry_after`` says, in seconds: a
#: Retry-After asking for more (weeks, or a date far ahead, from a proxy or
#: a clock set wrong) would have a stream, or a caller retrying, sleep for
#: as long. The gateway itself asks for a second.
MAX_RETRY_AFTER = 30.0


def _retry_after(value: Optional[str]) -> Optional[float]:
    if not value:
        return None
    """A Retry-After header, seconds or an HTTP date, as a wait of at most
    MAX_RETRY_AFTER seconds."""
    value = value.strip()
    if value.isascii() and value.isdigit():
        return min(float(value), MAX_RETRY_AFTER)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return min(max(0.0, when.timestamp() - time.time()), MAX_RETRY_AFTER)


def error_from(op: str, status: int, body: bytes, headers: Message) -> APIError:
    """The error of an answer that is not 200, with its headers."""
    retry = _retry_after(headers.get("Retry-After"))
    # The header too, as it outlives a body a proxy put in place of the gateway's.
    request_id = headers.get("Vigil-Request-Id") or None
    try:
        detail = json.loads(body.decode("utf-8"))["error"]
        code, message = detail["code"], detail.get("message")
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
        code, message = None, None
    if not isinstance(code, str) or not code:
        text = body.decode("utf-8", "replace").strip()[:200] or "no body"
        return APIError(op, status, "", f"HTTP {status}: {text}", retry, request_id)
    if isinstance(detail.get("requestId"), str) and detail["requestId"]:
        request_id = detail["requestId"]
    if not isinstance(message, str) or not message:
        # A code without its message is still the gateway's refusal: the
        # code is kept, and the message says at least what was answered.
        message = f"HTTP {status}: {code}"
    if status == 409:
        data = detail.get("noticeData")
        return ConflictError(op, status, code, message, retry, detail.get("stateVersion"), detail.get("notice", ""),
                             decode(NoticeData, data) if data else None)
    return _BY_CODE.get(code, APIError)(op, status, code, message, retry, request_id)


def error_in(op: str, status: int, answer: Any, body: bytes, headers: Message) -> Optional[APIError]:
    """The error a 200 answer says it is, or None.

    No output of the gateway has an "error" object (sessions_send's
    "error" is a text): an answer holding one is an error answer whose
    status was changed on the way, and read as the output it would be an
    empty success. It is the error its code says, or, without one, an
    APIError showing it.
    """
    if not isinstance(answer, dict) or not isinstance(answer.get("error"), dict):
        return None
    error = error_from(op, status, body, headers)
    if not error.code:
        text = body.decode("utf-8", "replace").strip()[:200]
        error = APIError(op, status, "", f"HTTP {status} holding an error, not an output: {text}", error.retry_after,
                         error.request_id)
    return error


def not_the_gateways(op: str, status: int, content_type: Optional[str], path: str, want: str) -> Optional[APIError]:
    """The error of a 200 answer whose Content-Type is not ``want``, or None.

    The gateway sends application/json on every answer of its API and
    text/event-stream on its streams, never without a Content-Type: another
    one is a page from something answering in its place (a wrong base URL, a
    proxy's login page, a load balancer's health page). The error names the
    Content-Type and the path asked, never the query or the token.
    """
    if content_type and content_type.split(";", 1)[0].strip().lower() == want:
        return None
    what = f'Content-Type "{content_type}"' if content_type else "no Content-Type"
    return APIError(op, status, "", f"HTTP {status} with {what} from {path}, not {want}: "
                    "what answers is not a vigil gateway (is the base URL right?)")
