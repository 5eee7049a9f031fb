"""The JSON-RPC 2.0 messages as :class:`~acp_agent.rpc.connection.Connection` reads and
writes them, and the checks a line passes before it is decoded."""

# No ``from __future__ import annotations`` (here, in ``config`` and in the wire types):
# msgspec reads these types' annotations as objects, and one kept as text is compiled
# when a decoder is first made for it, on the way to the ``initialize`` reply.
from typing import Any

import msgspec
from msgspec import UNSET, Raw, UnsetType

from ..errors import AcpError, InvalidRequest, ParseError
from .outline import MAX_DEPTH, lone_surrogate, too_deep

RequestId = int | str | None


class Envelope(msgspec.Struct):
    jsonrpc: Any = UNSET
    id: Any = UNSET
    method: Any = UNSET
    params: Raw | UnsetType = UNSET
    result: Raw | UnsetType = UNSET
    error: Any = UNSET


class Request(msgspec.Struct):
    jsonrpc: str
    id: RequestId
    method: str
    params: Any


class Notification(msgspec.Struct):
    jsonrpc: str
    method: str
    params: Any


class Result(msgspec.Struct):
    jsonrpc: str
    id: RequestId
    result: Any


class ErrorResponse(msgspec.Struct):
    jsonrpc: str
    id: RequestId
    error: dict[str, Any]


class ErrorObject(msgspec.Struct):
    code: int
    message: str
    data: Any = None


class CancelParams(msgspec.Struct):
    requestId: RequestId


envelope_decoder = msgspec.json.Decoder(Envelope)
error_decoder = msgspec.json.Decoder(ErrorObject)
cancel_decoder = msgspec.json.Decoder(CancelParams)
NULL = b"null"


def valid_id(value: Any) -> bool:
    return value is None or (type(value) is int) or isinstance(value, str)


def request_key(request_id: RequestId) -> tuple[type, RequestId]:
    # 1 and "1" are different ids; the type keeps them apart.
    return (type(request_id), request_id)


class TooDeep(InvalidRequest):
    default_message = f"Invalid request: nested more than {MAX_DEPTH} levels deep"


def undecodable(line: bytes) -> AcpError | None:
    """Why ``line`` must not go to the decoder: bytes that are not UTF-8 (msgspec does
    not check the UTF-8 of the values it skips), or nesting beyond ``MAX_DEPTH``."""
    if not line.isascii():
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as exc:
            return ParseError(f"Parse error: invalid UTF-8 at byte {exc.start}")
    if too_deep(line):
        return TooDeep()
    return None


def parse_error(line: bytes, exc: msgspec.DecodeError) -> str:
    surrogate = lone_surrogate(line)
    if surrogate is not None:  # msgspec calls it "truncated" when the value is skipped
        return f"Parse error: lone surrogate escape {surrogate[1]} at byte {surrogate[0]}"
    return f"Parse error: {exc}"
