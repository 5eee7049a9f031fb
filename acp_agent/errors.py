"""Exceptions, in three families that never mix::

    AcpError(code, message, data)           a JSON-RPC error sent to the client
     ├ ParseError           -32700
     ├ InvalidRequest       -32600
     ├ MethodNotFound       -32601
     ├ InvalidParams        -32602
     ├ InternalError        -32603          (traceback goes to the log, never to the client)
     ├ RequestCancelled     -32800
     ├ AuthRequired         -32000
     └ ResourceNotFound     -32002          (data carries e.g. {"sessionId": ...})

    ProviderError(message)                  a model provider failed; translated once, at the
     ├ ProviderAuthError    (status)        provider boundary, from httpx/openai/anthropic errors
     ├ ProviderHTTPError    (status, body, retry_after)   .retryable for 408/409/429/5xx
     │  └ ProviderContextError              the request is longer than the model's window
     ├ ProviderConnectionError              network failure before the answer started
     │  └ ProviderTimeoutError              no answer, or a stalled stream (providers.resilient)
     └ ProviderStreamError                  the stream broke or ended without a finish

    ToolError(message)                      a tool failed; reported to the model as a failed
                                            tool call, never as a JSON-RPC error

``asyncio.CancelledError`` is not an error here: it always propagates and is turned into
the ``cancelled`` stop reason only at the outer edge of a turn.
"""

from __future__ import annotations

from typing import Any, ClassVar


class AcpError(Exception):
    code: ClassVar[int] = -32603
    default_message: ClassVar[str] = "Internal error"

    def __init__(self, message: str | None = None, data: Any = None) -> None:
        self.message = message or self.default_message
        self.data = data
        super().__init__(self.message)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            out["data"] = self.data
        return out


class ParseError(AcpError):
    code = -32700
    default_message = "Parse error"


class InvalidRequest(AcpError):
    code = -32600
    default_message = "Invalid request"


class MethodNotFound(AcpError):
    code = -32601
    default_message = "Method not found"


class InvalidParams(AcpError):
    code = -32602
    default_message = "Invalid params"


class InternalError(AcpError):
    code = -32603
    default_message = "Internal error"


class RequestCancelled(AcpError):
    code = -32800
    default_message = "Request cancelled"


class AuthRequired(AcpError):
    code = -32000
    default_message = "Authentication required"


class ResourceNotFound(AcpError):
    code = -32002
    default_message = "Resource not found"


class SessionNotFound(ResourceNotFound):
    def __init__(self, session_id: str) -> None:
        super().__init__(f"Session not found: {session_id}", {"sessionId": session_id})


class RemoteError(Exception):
    """The client answered one of our requests with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        self.code = code
        self.message = message
        self.data = data
        super().__init__(f"{message} ({code})")


# --------------------------------------------------------------------------- providers


class ProviderError(Exception):
    retryable: bool = False
    retry_after: float | None = None
    unreachable: bool = False
    """Nothing answers there: the connection was refused or the host is unknown."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


class ProviderAuthError(ProviderError):
    """The key is missing or was rejected (401/403)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ProviderHTTPError(ProviderError):
    def __init__(
        self, message: str, status: int, body: str = "", retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.retry_after = retry_after
        self.retryable = status in (408, 409, 429) or status >= 500


class ProviderContextError(ProviderHTTPError):
    """The request did not fit the model's context window (OpenAI
    ``context_length_exceeded``, Anthropic ``prompt is too long``, vLLM's "maximum context
    length"): the turn makes room and tries again (see ``compaction``). ``limit``: the
    window the server named, when it did."""

    limit: int | None = None


class ProviderConnectionError(ProviderError):
    retryable = True


class ProviderTimeoutError(ProviderConnectionError):
    """No first event in time, or no next event in time (see ``providers.resilient``)."""


class ProviderStreamError(ProviderError):
    """The stream broke mid-answer, or ended without a finish reason."""


# --------------------------------------------------------------------------- tools


class ToolError(Exception):
    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)
