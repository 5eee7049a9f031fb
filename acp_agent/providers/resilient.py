"""The one way a model request is made: :class:`Resilient` wraps a provider with retries,
back-off, timeouts and error discipline, for turns, compaction and subagents alike.

* **Retries.** A retryable :class:`~acp_agent.errors.ProviderError` (429, 408/409, 5xx,
  a refused or dropped connection, a timeout) is retried with exponential back-off and
  full jitter, or after the server's ``Retry-After``, at most ``max_retries`` times, and
  only while nothing of the answer was yielded (an answer already shown is never
  streamed twice). ``on_retry`` hears of each wait first, so the user can be told. An
  error given up on says how many retries it survived. A server that is not there (a
  refused connection, a host name that does not resolve) is not waited for while its
  endpoint has never answered this process: at start-up that is a mistake to fix, not a
  hiccup (once it has answered, it may be restarting, and is retried).
* **Timeouts.** ``first_event_timeout`` bounds the wait for the first event of a
  response, ``idle_timeout`` every later wait. Only time spent waiting on the provider
  counts (not the consumer's own work), and keep-alives are not events. A timeout is a
  :class:`~acp_agent.errors.ProviderTimeoutError` naming what timed out, where, and the
  limit (``limits.first-event-timeout``, ``limits.idle-timeout``). The SDKs' own HTTP
  timeouts are backstops set no shorter than these (``providers.registry.endpoint``).
* **Discipline.** The provider's stream is closed on every exit, cancellation included
  (which closes the HTTP response). Only ``ProviderError``\\ s come out; anything else a
  provider raises is a bug reported as a broken stream. ``CancelledError`` propagates.

The watchdog costs one clock read per event: no task, no timeout object per event.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from .. import log
from ..errors import ProviderError, ProviderStreamError, ProviderTimeoutError
from .base import ModelProvider, ModelRequest, StreamEvent

ANSWERED: set[str] = set()
"""The endpoints that have answered a request of this process."""

OnRetry = Callable[[ProviderError, int, float], Awaitable[None]]
"""``(error, retry number from 1, delay in seconds)``, before each wait."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 4
    max_delay: float = 30.0
    first_event_timeout: float = 120.0
    idle_timeout: float = 60.0


def backoff_delay(attempt: int, retry_after: float | None, max_delay: float) -> float:
    """Exponential back-off with full jitter; the server's Retry-After wins when given."""
    if retry_after is not None and retry_after >= 0:
        return min(retry_after, max_delay)
    return random.uniform(0, min(max_delay, 0.5 * 2**attempt))


class Resilient:
    """``inner`` behind the policy. Cheap to build: one per turn or per compaction, with
    its own ``on_retry``. It does not own ``inner`` (``aclose`` leaves it open)."""

    def __init__(
        self, inner: ModelProvider, policy: RetryPolicy, on_retry: OnRetry | None = None
    ) -> None:
        self.inner = inner
        self.policy = policy
        self.on_retry = on_retry

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def endpoint(self) -> str:
        return self.inner.endpoint

    async def aclose(self) -> None:
        return None  # the inner provider is shared; its owner closes it

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        attempt = 0
        while True:
            started = False
            try:
                async for event in self._attempt(request):
                    if not started:
                        started = True
                        ANSWERED.add(self.endpoint)
                    yield event
                return
            except ProviderError as exc:
                absent = exc.unreachable and self.endpoint not in ANSWERED
                if started or not exc.retryable or absent or attempt >= self.policy.max_retries:
                    if attempt:
                        s = "y" if attempt == 1 else "ies"
                        exc.message = f"{exc.message} (gave up after {attempt} retr{s})"
                        exc.args = (exc.message,)
                    raise
                delay = backoff_delay(attempt, exc.retry_after, self.policy.max_delay)
                attempt += 1
                log.warning("model request failed; retrying", error=exc.message, delay=delay)
                if self.on_retry is not None:
                    await self.on_retry(exc, attempt, delay)
                await asyncio.sleep(delay)

    async def _attempt(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        stream = self.inner.stream(request)
        dog = _Watchdog(loop, task, self.policy.first_event_timeout)
        try:
            while True:
                dog.since = loop.time()
                dog.waiting = True
                try:
                    event = await anext(stream)
                except StopAsyncIteration:
                    return
                except asyncio.CancelledError:
                    if dog.fired and task.uncancel() == 0:
                        raise self._timed_out(dog) from None
                    raise
                except ProviderError:
                    raise
                except Exception as exc:
                    log.exception("provider failed", provider=self.name)
                    raise ProviderStreamError(
                        f"{self.name} stream failed: {type(exc).__name__}: {exc}"
                    ) from exc
                finally:
                    dog.waiting = False
                if not dog.seen:
                    dog.started(self.policy.idle_timeout)
                yield event
        finally:
            dog.stop()
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()

    def _timed_out(self, dog: _Watchdog) -> ProviderTimeoutError:
        where = f"{self.name} at {self.endpoint}"
        if not dog.seen:
            return ProviderTimeoutError(
                f"No answer from {where} within {dog.limit:g} s (limits.first-event-timeout)"
            )
        return ProviderTimeoutError(
            f"The stream from {where} stalled for {dog.limit:g} s (limits.idle-timeout)"
        )


class _Watchdog:
    """Cancels ``task`` when a wait on the provider outlasts ``limit``; re-armed lazily
    (at most once per ``limit``), so a fast stream pays nothing but a clock read."""

    __slots__ = ("_handle", "_loop", "_task", "fired", "limit", "seen", "since", "waiting")

    def __init__(self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[object],
                 limit: float) -> None:  # fmt: skip
        self._loop = loop
        self._task = task
        self.limit = limit
        self.since = loop.time()
        self.waiting = False
        self.fired = False
        self.seen = False
        self._handle: asyncio.TimerHandle | None = loop.call_at(self.since + limit, self._check)

    def _check(self) -> None:
        now = self._loop.time()
        due = self.since + self.limit
        if self.waiting and now >= due:
            self._handle = None
            self.fired = True
            self._task.cancel()
            return
        self._handle = self._loop.call_at(due if self.waiting else now + self.limit, self._check)

    def started(self, idle: float) -> None:
        """The first event arrived: from now on the limit is ``idle``."""
        self.seen = True
        self.limit = idle
        self.stop()
        self._handle = self._loop.call_at(self._loop.time() + idle, self._check)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
