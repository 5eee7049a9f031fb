"""What the SDK-backed providers share: relaying an SDK stream through an assembler,
translating SDK and transport errors once, ``Retry-After``, and tool-argument parsing.

Both official SDKs have the same shape (``APIStatusError`` with ``status_code`` and
``response``, ``APITimeoutError``, ``APIConnectionError``), so one translation serves
both; it matches by class name so neither SDK is imported here.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Protocol

import msgspec

from ..errors import (
    ProviderAuthError,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderStreamError,
)
from .base import StreamEvent


class _Source(Protocol):
    """An SDK stream: async-iterable and closable."""

    def __aiter__(self) -> AsyncIterator[Any]: ...

    async def close(self) -> None: ...


class _Assembler(Protocol):
    started: bool  # events were produced, so a failure now breaks a started answer

    def feed(self, item: Any) -> list[StreamEvent]: ...

    def finish(self) -> list[StreamEvent]: ...


async def relay(
    open_stream: Callable[[], Awaitable[_Source]],
    assembler: _Assembler,
    map_error: Callable[[Exception, bool], ProviderError],
) -> AsyncIterator[StreamEvent]:
    """Open an SDK stream, feed its items to ``assembler`` and yield the events; vendor errors
    are translated with ``map_error``. The SDK stream is closed on every exit, cancellation
    included, which closes the HTTP connection of an unfinished response."""
    try:
        source = await open_stream()
    except ProviderError:
        raise
    except Exception as exc:
        raise map_error(exc, False) from exc
    try:
        iterator = aiter(source)
        while True:
            try:
                events = assembler.feed(await anext(iterator))
            except StopAsyncIteration:
                break
            except ProviderError as exc:
                if assembler.started and not isinstance(exc, ProviderStreamError):
                    raise ProviderStreamError(exc.message) from exc
                raise
            except Exception as exc:
                raise map_error(exc, assembler.started) from exc
            for event in events:
                yield event
    finally:
        await source.close()
    for event in assembler.finish():
        yield event


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait, from ``retry-after-ms`` or ``retry-after`` (seconds or HTTP date)."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value:
            try:
                return max(0.0, float(value) * scale)
            except ValueError:
                pass
    value = headers.get("retry-after")
    import email.utils  # only on this rare path: it costs ~20 ms to import

    try:
        when = email.utils.parsedate_to_datetime(value) if value else None
    except (TypeError, ValueError):
        return None
    return None if when is None else max(0.0, when.timestamp() - time.time())


def parse_tool_arguments(text: str) -> tuple[dict[str, Any], str | None]:
    """The argument object, or ``({}, error)`` when the text is not a JSON object."""
    if not text.strip():
        return {}, None
    try:
        value = msgspec.json.decode(text)
    except msgspec.DecodeError as exc:
        return {}, f"tool arguments are not valid JSON ({exc}): {text[:200]}"
    if not isinstance(value, dict):
        return {}, f"tool arguments must be a JSON object, got: {text[:200]}"
    return value, None


def map_sdk_error(exc: Exception, vendor: str, *, started: bool) -> ProviderError:
    """Translate an ``openai``/``anthropic`` SDK (or httpx) exception. ``started``: events were
    already yielded, so a broken connection is a broken stream rather than a failed request.

    Matched by class name so it holds for either SDK and its transport (httpx or httpx2)
    without importing them here."""
    kinds = {cls.__name__ for cls in type(exc).__mro__}
    status = getattr(exc, "status_code", None)
    response = getattr(exc, "response", None)
    if "APIStatusError" in kinds and isinstance(status, int) and response is not None:
        message = f"{vendor} HTTP {status}: {getattr(exc, 'message', exc)}"
        if status in (401, 403):
            return ProviderAuthError(message, status)
        try:
            body = response.text
        except Exception:  # the body was never read
            body = ""
        return ProviderHTTPError(message, status, body, parse_retry_after(response.headers))
    timed_out = bool(kinds & {"APITimeoutError", "TimeoutException"})
    if timed_out or kinds & {"APIConnectionError", "TransportError"}:
        what = "timed out" if timed_out else f"failed: {exc.__cause__ or exc}"
        if started:  # a stall or a cut after output: the answer is broken, not retryable as is
            return ProviderStreamError(f"{vendor} stream {what}")
        return ProviderConnectionError(f"{vendor} request {what}")
    return ProviderStreamError(f"{vendor} stream failed: {type(exc).__name__}: {exc}")
