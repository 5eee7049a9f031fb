"""A JSON-RPC 2.0 endpoint: reads lines, dispatches them, writes replies.

It knows JSON-RPC, not ACP: no sessions, no turns. Every inbound request runs in its own
task, so a long request never blocks notifications, other requests, or the responses to
our own outgoing requests. Notifications run as tasks too, started in arrival order;
asyncio runs new tasks first-in first-out, so a handler's code before its first ``await``
runs before any message that arrived after it.

No input ends :meth:`Connection.serve`. A line that cannot be decoded (invalid UTF-8, a
lone surrogate escape, malformed JSON, nested deeper than ``outline.MAX_DEPTH``) is
outlined without recursion: a request gets its error with its ``id`` when the top-level
``id`` can be read (else ``null``), a notification gets nothing, a response fails the
request it answers. Anything else that goes wrong while dispatching is logged and, for a
request, answered with an internal error.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Generic, Protocol, TypeVar

import msgspec
from msgspec import UNSET, Raw, UnsetType

from .. import log
from ..errors import (
    AcpError,
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    ParseError,
    RemoteError,
    RequestCancelled,
)
from .envelope import (
    NULL,
    Envelope,
    ErrorResponse,
    Notification,
    Request,
    RequestId,
    Result,
    TooDeep,
    cancel_decoder,
    envelope_decoder,
    error_decoder,
    parse_error,
    request_key,
    undecodable,
    valid_id,
)
from .framing import LineSink, LineSource, Oversized
from .outline import NESTED, outline

P = TypeVar("P")
R = TypeVar("R")

CANCEL_REQUEST = "$/cancel_request"


class Route(Generic[P]):
    """How to handle one method.

    ``on_cancel(params, task)`` lets a request handle ``$/cancel_request`` itself (it must
    still answer; ``task`` is the request's own handler task, to tell it from others);
    without it the handler task is cancelled and the request answered with -32800.
    """

    __slots__ = ("handler", "notification", "on_cancel", "params_type")

    def __init__(
        self,
        params_type: type[P],
        handler: Callable[[P], Awaitable[Any]],
        notification: bool = False,
        on_cancel: Callable[[P, asyncio.Task[None]], None] | None = None,
    ) -> None:
        self.params_type = params_type
        self.handler = handler
        self.notification = notification
        self.on_cancel = on_cancel


#: How long, at the end, the handlers still running get to answer: a cancelled turn
#: answers ``cancelled`` once its turn end is on disk (an ``fsync``), which a busy disk can
#: make take a while; normally they answer within milliseconds and exit does not wait.
CLOSE_GRACE = 5.0


class ConnectionClosed(Exception):
    """The peer went away while we waited for its answer."""


class _InFlight:
    __slots__ = ("cancel_requested", "params", "route", "task")

    def __init__(self, task: asyncio.Task[None], route: Route[Any], params: Any) -> None:
        self.task = task
        self.route = route
        self.params = params
        self.cancel_requested = False


class Coalescer(Protocol):
    """How notifications of one method merge (see :attr:`Connection.coalesce`)."""

    def merge(self, held: Any, params: Any) -> Any:
        """``held`` (params, or what an earlier merge returned) with ``params`` merged in,
        or ``None`` when they do not merge."""
        ...

    def done(self, held: Any) -> Any:
        """The params to send for what is held."""
        ...


class Connection:
    def __init__(
        self,
        reader: LineSource,
        writer: LineSink,
        routes: Mapping[str, Route[Any]] | None = None,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self.routes: dict[str, Route[Any]] = dict(routes or {})
        self._decoders: dict[type, msgspec.json.Decoder[Any]] = {}
        self._encoder = msgspec.json.Encoder()
        self._inflight: dict[tuple[type, RequestId], _InFlight] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._pending: dict[int, tuple[asyncio.Future[Raw], type]] = {}
        self._ids = itertools.count()
        self._sent = 0
        self._closing = False  # close() has begun: new outgoing requests fail at once
        self._closed = False
        self.coalesce: dict[str, Coalescer] = {}
        """Notifications that may be merged (by method): one sent while another of its
        method waits to be written in the same loop turn is merged into it when the
        coalescer says they merge; the held one leaves when the loop turns, or before
        anything else is written. Nothing waits longer than the code that wrote it."""
        self._held: tuple[str, Any] | None = None

    # ------------------------------------------------------------------ serving

    async def serve(self) -> None:
        """Read and dispatch until end of input (then see :meth:`close`)."""
        while True:
            line = await self._reader.readline()
            if line is None:
                return
            try:
                self._dispatch(line)
            except Exception:
                log.exception("cannot dispatch a message")
                self._dispatch_failed(line)

    async def close(self, grace: float = CLOSE_GRACE) -> None:
        """Stop: outgoing requests fail at once, handlers get ``grace`` seconds to answer
        (a cancelled turn still sends its ``cancelled``), then the rest are cancelled."""
        if self._closing:
            return
        self._closing = True
        for fut, _ in self._pending.values():
            if not fut.done():
                fut.set_exception(ConnectionClosed("connection closed"))
        self._pending.clear()
        tasks = [t for t in self._tasks if not t.done()]
        if tasks and grace > 0:
            await asyncio.wait(tasks, timeout=grace)
        self._release()
        self._closed = True
        tasks = [t for t in self._tasks if not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=0.5)

    def _dispatch(self, line: bytes | Oversized) -> None:
        if isinstance(line, Oversized):
            self._send_error(None, InvalidRequest(f"Message too large ({line.size} bytes)"))
            return
        problem = undecodable(line)
        if problem is None:
            try:
                env = envelope_decoder.decode(line)
            except msgspec.ValidationError as exc:
                problem = (
                    InvalidRequest(f"Invalid request: {exc}")
                    if line.lstrip().startswith(b"{")
                    else InvalidRequest("Invalid request: not a JSON object")
                )
            except msgspec.DecodeError as exc:
                problem = ParseError(parse_error(line, exc))
            except RecursionError:  # not expected below MAX_DEPTH; never fatal anyway
                problem = TooDeep()
        if problem is not None:
            self._unreadable(line, problem)
            return
        has_id = env.id is not UNSET
        if env.method is not UNSET:
            if env.jsonrpc != "2.0":
                self._send_error(
                    env.id if has_id and valid_id(env.id) else None,
                    InvalidRequest('Invalid request: "jsonrpc" must be "2.0"'),
                )
            elif not isinstance(env.method, str):
                self._send_error(
                    env.id if has_id and valid_id(env.id) else None,
                    InvalidRequest('Invalid request: "method" must be a string'),
                )
            elif not has_id:
                self._on_notification(env.method, env.params)
            elif not valid_id(env.id):
                self._send_error(
                    None,
                    InvalidRequest('Invalid request: "id" must be a string, an integer or null'),
                )
            else:
                self._on_request(env.id, env.method, env.params)
        elif env.result is not UNSET or env.error is not UNSET:
            self._on_response(env)
        else:
            self._send_error(
                env.id if has_id and valid_id(env.id) else None,
                InvalidRequest("Invalid request: no method, result or error"),
            )

    def _unreadable(self, line: bytes, problem: AcpError) -> None:
        """Answer a line that did not decode, by its outline (never by a nested ``id``)."""
        shape = outline(line)
        if shape is None:  # not even a complete JSON object
            self._send_error(None, problem)
            return
        if isinstance(problem, TooDeep) and (where := shape.deepest()) is not None:
            problem = InvalidRequest(f"{problem.message} - at `$.{where}`")
        values = shape.values
        request_id = values.get("id", NESTED)
        readable_id = request_id if valid_id(request_id) else None
        if "method" in values:
            if "id" in values:
                self._send_error(readable_id, problem)
            else:  # a notification: never answered
                log.warning("unreadable notification ignored", error=problem.message)
        elif "result" in values or "error" in values:
            self._fail_pending(request_id, problem)
        else:
            self._send_error(readable_id, problem)

    def _fail_pending(self, request_id: Any, problem: AcpError) -> None:
        """An unreadable response: the request it answers fails (its waiter moves on)."""
        entry = self._pending.pop(request_id, None) if type(request_id) is int else None
        if entry is None:
            log.info("unreadable response", error=problem.message)
            return
        fut, _ = entry
        if not fut.done():
            fut.set_exception(RemoteError(problem.code, f"Unreadable response: {problem.message}"))

    def _dispatch_failed(self, line: bytes | Oversized) -> None:
        """``_dispatch`` raised: a request that is not running yet gets an internal error."""
        try:
            shape = outline(line) if isinstance(line, bytes) else None
            if shape is None or "method" not in shape.values:
                return
            request_id = shape.values.get("id", NESTED)
            if valid_id(request_id) and request_key(request_id) not in self._inflight:
                self._send_error(request_id, InternalError())
        except Exception:
            log.exception("cannot answer a message whose dispatch failed")

    def _decode_params(self, route: Route[Any], raw: Raw | UnsetType) -> Any:
        dec = self._decoders.get(route.params_type)
        if dec is None:
            dec = self._decoders[route.params_type] = msgspec.json.Decoder(route.params_type)
        try:
            return dec.decode(NULL if raw is UNSET else raw)
        except msgspec.ValidationError as exc:
            raise InvalidParams(f"Invalid params: {exc}") from None
        except msgspec.DecodeError as exc:
            raise ParseError(f"Parse error: {exc}") from None

    def _on_request(self, request_id: RequestId, method: str, raw: Raw | UnsetType) -> None:
        route = self.routes.get(method)
        if route is None or route.notification:
            self._send_error(request_id, MethodNotFound(f"Method not found: {method}"))
            return
        try:
            params = self._decode_params(route, raw)
        except AcpError as exc:
            self._send_error(request_id, exc)
            return
        key = request_key(request_id)
        if key in self._inflight:
            self._send_error(request_id, InvalidRequest("Invalid request: duplicate request id"))
            return
        task = asyncio.create_task(self._run_request(request_id, route, params))
        self._inflight[key] = _InFlight(task, route, params)
        self._track(task)

    async def _run_request(self, request_id: RequestId, route: Route[Any], params: Any) -> None:
        key = request_key(request_id)
        try:
            with log.bound(request_id=request_id):
                result = await route.handler(params)
        except asyncio.CancelledError:
            entry = self._inflight.get(key)
            if entry is not None and entry.cancel_requested and not self._closed:
                self._send_error(request_id, RequestCancelled())
                return
            raise
        except AcpError as exc:
            self._send_error(request_id, exc)
        except Exception:
            log.exception("request handler failed", method=_method_of(route, self.routes))
            self._send_error(request_id, InternalError())
        else:
            self._send_result(request_id, {} if result is None else result)
        finally:
            self._inflight.pop(key, None)

    def _on_notification(self, method: str, raw: Raw | UnsetType) -> None:
        if method == CANCEL_REQUEST:
            self._on_cancel_request(raw)
            return
        route = self.routes.get(method)
        if route is None or not route.notification:
            return  # unknown notifications are ignored, never answered
        try:
            params = self._decode_params(route, raw)
        except AcpError as exc:
            log.warning("invalid notification params", method=method, error=exc.message)
            return
        self._track(asyncio.create_task(self._run_notification(method, route, params)))

    async def _run_notification(self, method: str, route: Route[Any], params: Any) -> None:
        try:
            await route.handler(params)
        except Exception:
            log.exception("notification handler failed", method=method)

    def _on_cancel_request(self, raw: Raw | UnsetType) -> None:
        try:
            request_id = cancel_decoder.decode(NULL if raw is UNSET else raw).requestId
        except msgspec.ValidationError:
            return
        entry = self._inflight.get(request_key(request_id))
        if entry is None or entry.task.done():
            return  # already answered: nothing more to send
        if entry.route.on_cancel is not None:
            entry.route.on_cancel(entry.params, entry.task)
        else:
            entry.cancel_requested = True
            entry.task.cancel()

    def _track(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ outgoing

    def _send(self, message: Any) -> None:
        if self._closed and not isinstance(message, (Result, ErrorResponse)):
            return
        if self._held is not None:
            self._release()
        self._writer.write_line(self._encoder.encode(message) + b"\n")

    def _send_result(self, request_id: RequestId, result: Any) -> None:
        try:
            line = self._encoder.encode(Result("2.0", request_id, result))
        except Exception:  # a handler returned something that is not JSON
            log.exception("cannot encode a result")
            self._send_error(request_id, InternalError())
        else:
            if self._held is not None:
                self._release()
            self._writer.write_line(line + b"\n")

    def _send_error(self, request_id: RequestId, exc: AcpError) -> None:
        self._send(ErrorResponse("2.0", request_id, exc.to_dict()))

    async def notify(self, method: str, params: Any) -> None:
        """Send a notification (waits when the peer is not reading fast enough).

        Every few notifications it also yields to the event loop, so a stream that never
        waits on I/O (a fast model, a replay) cannot starve ``session/cancel``."""
        if self._closed:
            return
        held = self._held
        if held is not None and held[0] == method:
            merged = self.coalesce[method].merge(held[1], params)
            if merged is not None:
                self._held = (method, merged)
        else:
            merged = None
        if merged is None:
            if held is not None:
                self._release()
            if method in self.coalesce:
                self._held = (method, params)
                asyncio.get_running_loop().call_soon(self._release)
            else:
                line = self._encoder.encode(Notification("2.0", method, params)) + b"\n"
                self._writer.write_line(line)
        self._sent += 1
        if not self._sent & 31:
            await asyncio.sleep(0)
        await self._writer.drain()

    def _release(self) -> None:
        """Write the held notification, if any."""
        held, self._held = self._held, None
        if held is not None:
            params = self.coalesce[held[0]].done(held[1])
            line = self._encoder.encode(Notification("2.0", held[0], params)) + b"\n"
            self._writer.write_line(line)

    async def request(
        self, method: str, params: Any, result_type: type[R], *, cancel_remote: bool = True
    ) -> R:
        """Send a request and wait for its result; a cancel of the waiter is passed on to
        the peer with ``$/cancel_request`` (unless ``cancel_remote`` is off: the peer ends
        such a request by itself, e.g. a permission question after ``session/cancel``)."""
        if self._closing:
            raise ConnectionClosed("connection closed")
        request_id = next(self._ids)
        fut: asyncio.Future[Raw] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = (fut, result_type)
        self._send(Request("2.0", request_id, method, params))
        try:
            raw = await fut
        except asyncio.CancelledError:
            abandoned = self._pending.pop(request_id, None) is not None
            if abandoned and cancel_remote and not self._closed:
                self._send(Notification("2.0", CANCEL_REQUEST, {"requestId": request_id}))
            raise
        dec = self._decoders.get(result_type)
        if dec is None:
            dec = self._decoders[result_type] = msgspec.json.Decoder(result_type)
        try:
            return dec.decode(raw)  # type: ignore[no-any-return]
        except msgspec.ValidationError as exc:
            raise RemoteError(-32602, f"Invalid result for {method}: {exc}") from None

    def _on_response(self, env: Envelope) -> None:
        request_id = env.id
        entry = self._pending.pop(request_id, None) if type(request_id) is int else None
        if entry is None:
            if env.error is not UNSET:
                log.info("error response from client", id=request_id, error=env.error)
            else:
                log.info("response for an unknown request id", id=request_id)
            return
        fut, _ = entry
        if fut.done():
            return
        if env.error is not UNSET:
            try:
                err = error_decoder.decode(self._encoder.encode(env.error))
                fut.set_exception(RemoteError(err.code, err.message, err.data))
            except msgspec.ValidationError:
                fut.set_exception(RemoteError(-32603, "Malformed error response"))
        else:
            assert not isinstance(env.result, UnsetType)
            fut.set_result(env.result)


def _method_of(route: Route[Any], routes: Mapping[str, Route[Any]]) -> str:
    return next((m for m, r in routes.items() if r is route), "?")
