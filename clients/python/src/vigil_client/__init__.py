"""A client of a vigil gateway's HTTP API, on the standard library alone.

>>> from vigil_client import Client
>>> manager = Client("http://127.0.0.1:7317", token="...", session="agent:main:main")
>>> turn = manager.session_turn("agent:main:main", wait_seconds=30)
>>> for line in turn.system_events: ...

Every tool is a method named for it, taking its input as keyword
arguments in snake_case and returning its output as a dataclass. Errors
are in ``vigil_client.errors``; events of the streams in
``vigil_client.types``.
"""

from .client import SESSION_HEADER, Client, Stream
from .errors import (APIError, ConflictError, InternalError, InvalidArgumentError, NotFoundError,
                     PayloadTooLargeError, PermissionDeniedError, RequestTimeoutError, TooManyRequestsError,
                     TransportError, UnauthenticatedError, UnavailableError, VigilError)
from .types import (AgentEvent, Bookmark, Dropped, Event, HistoryGap, Lagged, LiveEvent, LogEvent, NoticeData,
                    Resumed, SessionDeleted)

__all__ = [
    "SESSION_HEADER", "Client", "Stream",
    "VigilError", "TransportError", "APIError", "InvalidArgumentError", "UnauthenticatedError",
    "PermissionDeniedError", "NotFoundError", "RequestTimeoutError", "ConflictError", "PayloadTooLargeError",
    "TooManyRequestsError", "InternalError", "UnavailableError",
    "Event", "AgentEvent", "LogEvent", "LiveEvent", "NoticeData", "Bookmark", "HistoryGap", "Lagged", "SessionDeleted", "Resumed",
    "Dropped",
]
