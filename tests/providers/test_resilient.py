"""The resilient wrapper every model request goes through: retries, timeouts, closing,
and only ProviderErrors out. Timeouts are configured small where only endless stalls
meet them; where something must arrive in time, they are a minute on a clock the test
moves (``LoopClock``), so the outcome never depends on how busy the machine is."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from acp_agent.errors import (
    ProviderAuthError,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderStreamError,
    ProviderTimeoutError,
)
from acp_agent.providers.base import Finished, ModelRequest, StreamEvent, TextDelta
from acp_agent.providers.resilient import Resilient, RetryPolicy, backoff_delay

from ..fakes.provider import Gate, Item, ScriptedProvider, text
from ..timeouts import LoopClock

REQUEST = ModelRequest(system="s", messages=[])


def wrap(
    provider: ScriptedProvider, **policy: Any
) -> tuple[Resilient, list[tuple[str, int, float]]]:
    heard: list[tuple[str, int, float]] = []

    async def on_retry(exc: ProviderError, attempt: int, delay: float) -> None:
        heard.append((exc.message, attempt, delay))

    settings = {"max_retries": 3, "max_delay": 0.0, **policy}
    return Resilient(provider, RetryPolicy(**settings), on_retry), heard


async def drain(stream: Any) -> list[StreamEvent]:
    return [event async for event in stream]


async def test_retries_what_is_retryable_and_tells_each_wait() -> None:
    provider = ScriptedProvider(
        [ProviderHTTPError("rate limited", 429, retry_after=0)],
        [ProviderConnectionError("refused")],
        text("ok"),
    )
    resilient, heard = wrap(provider)
    events = await drain(resilient.stream(REQUEST))
    assert events[0] == TextDelta("ok")
    assert heard == [("rate limited", 1, 0.0), ("refused", 2, 0.0)]
    assert provider.opened == provider.closed == 3


async def test_gives_up_after_max_retries_with_the_last_error() -> None:
    errors: list[list[Item]] = [[ProviderHTTPError(f"busy {i}", 503)] for i in range(5)]
    resilient, heard = wrap(ScriptedProvider(*errors), max_retries=2)
    with pytest.raises(ProviderHTTPError) as raised:
        await drain(resilient.stream(REQUEST))
    assert raised.value.message == "busy 2 (gave up after 2 retries)"
    assert len(heard) == 2


@pytest.mark.parametrize("error", [
    ProviderHTTPError("bad request", 400),
    ProviderAuthError("no key", 401),
    ProviderStreamError("broken"),
])
async def test_does_not_retry_what_cannot_succeed(error: ProviderError) -> None:
    resilient, heard = wrap(ScriptedProvider([error], text("never")))
    with pytest.raises(type(error)):
        await drain(resilient.stream(REQUEST))
    assert heard == [] and "gave up" not in error.message


async def test_never_retries_once_output_was_yielded() -> None:
    provider = ScriptedProvider([TextDelta("half"), ProviderHTTPError("cut", 500)], text("dup"))
    resilient, heard = wrap(provider)
    seen: list[StreamEvent] = []
    with pytest.raises(ProviderHTTPError):
        async for event in resilient.stream(REQUEST):
            seen.append(event)
    assert seen == [TextDelta("half")] and heard == [] and provider.opened == 1


def test_backoff_honours_retry_after_up_to_the_cap() -> None:
    assert backoff_delay(0, 7.0, 30.0) == 7.0
    assert backoff_delay(0, 90.0, 30.0) == 30.0
    assert all(0 <= backoff_delay(n, None, 30.0) <= min(30.0, 0.5 * 2**n) for n in range(8))


async def test_first_event_timeout_names_the_endpoint_and_is_retried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = LoopClock(monkeypatch)
    stalls = [Gate(), Gate()]
    provider = ScriptedProvider([stalls[0]], [stalls[1]], text("at last"))
    resilient, heard = wrap(provider, first_event_timeout=60, idle_timeout=3600)
    streaming = asyncio.create_task(drain(resilient.stream(REQUEST)))
    for gate in stalls:
        await gate.reached.wait()
        clock.advance(60)  # the minute is up: the attempt is abandoned and retried
    events = await streaming
    assert events[0] == TextDelta("at last")
    assert [h[0] for h in heard] == [
        "No answer from scripted:model at memory://scripted within 60 s"
        " (limits.first-event-timeout)"
    ] * 2
    assert provider.closed == 3


async def test_a_stall_after_output_is_a_timeout_that_is_not_retried() -> None:
    provider = ScriptedProvider([TextDelta("a"), Gate()], text("dup"))
    resilient, heard = wrap(provider, first_event_timeout=3600, idle_timeout=0.05)
    with pytest.raises(ProviderTimeoutError, match=r"stalled for 0\.05 s"):
        await drain(resilient.stream(REQUEST))
    assert heard == [] and provider.closed == 1


async def test_the_consumers_own_time_does_not_count_as_idle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = LoopClock(monkeypatch)
    provider = ScriptedProvider(text("a", "b", "c"))
    resilient, _ = wrap(provider, first_event_timeout=60, idle_timeout=60)
    seen = []
    async for event in resilient.stream(REQUEST):
        seen.append(event)
        clock.advance(120)  # a slow consumer: two minutes over each event
        await asyncio.sleep(0.001)  # after every timer now due (the watchdog's) has run
    assert isinstance(seen[-1], Finished)


async def test_an_outside_cancel_is_a_cancel_not_a_timeout() -> None:
    gate = Gate()
    provider = ScriptedProvider([gate])
    resilient, heard = wrap(provider, first_event_timeout=3600)
    task = asyncio.create_task(drain(resilient.stream(REQUEST)))
    await gate.reached.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert heard == [] and provider.closed == 1


async def test_other_exceptions_become_stream_errors() -> None:
    resilient, heard = wrap(ScriptedProvider([KeyError("choices")]))
    with pytest.raises(ProviderStreamError, match="KeyError"):
        await drain(resilient.stream(REQUEST))
    assert heard == []


async def test_a_server_not_there_is_not_waited_for_until_it_has_answered() -> None:
    """At start-up a refused connection or an unknown host is a mistake to fix, not a
    hiccup; once the endpoint has answered, it may be restarting, and is retried."""
    from acp_agent.providers import resilient as module

    def absent() -> ProviderConnectionError:
        error = ProviderConnectionError("Cannot connect to x: connection refused")
        error.unreachable = True
        return error

    class Fresh(ScriptedProvider):
        endpoint = "memory://never-answered"

    module.ANSWERED.discard(Fresh.endpoint)
    first, heard = wrap(Fresh([absent()], text("never")))
    with pytest.raises(ProviderConnectionError) as raised:
        await drain(first.stream(REQUEST))
    assert heard == [] and "gave up" not in raised.value.message
    later, heard = wrap(Fresh(text("hello"), [absent()], text("back")))
    assert (await drain(later.stream(REQUEST)))[0] == TextDelta("hello")
    assert (await drain(later.stream(REQUEST)))[0] == TextDelta("back")  # retried now
    assert [n for _, n, _ in heard] == [1]
    module.ANSWERED.discard(Fresh.endpoint)
