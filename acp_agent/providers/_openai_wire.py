"""The Chat Completions stream, decoded with msgspec instead of the SDK's models.

The SDK still does everything around the stream (request building, auth, base URL,
timeouts, HTTP error mapping): we ask it for the raw streaming response
(``with_streaming_response``) and decode each ``data:`` event into the small Structs
below. Building the SDK's pydantic models costs about 200 µs a chunk (measured with
tools/bench.py); these cost a few. The Structs carry the attribute names the chunk
assembler reads, so both representations feed it alike.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import msgspec

from ..errors import ProviderHTTPError, ProviderStreamError


class Function(msgspec.Struct):
    name: str | None = None
    arguments: str | None = None


class ToolCallFragment(msgspec.Struct):
    index: int | None = None
    id: str | None = None
    function: Function | None = None


class Delta(msgspec.Struct):
    content: str | None = None
    refusal: str | None = None
    reasoning_content: str | None = None  # vLLM, DeepSeek
    reasoning: str | None = None  # Ollama, OpenRouter
    tool_calls: list[ToolCallFragment] | None = None


class Choice(msgspec.Struct):
    index: int = 0
    delta: Delta | None = None
    finish_reason: str | None = None


class PromptDetails(msgspec.Struct):
    cached_tokens: int | None = None


class CompletionDetails(msgspec.Struct):
    reasoning_tokens: int | None = None


class Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: PromptDetails | None = None
    completion_tokens_details: CompletionDetails | None = None


class Chunk(msgspec.Struct):
    choices: list[Choice] | None = None
    usage: Usage | None = None
    error: dict[str, Any] | None = None


_decoder = msgspec.json.Decoder(Chunk)


class ChunkStream:
    """An SDK raw streaming response, iterated as :class:`Chunk` values."""

    def __init__(self, manager: AbstractAsyncContextManager[Any]) -> None:
        self._manager = manager
        self._response: Any = None

    async def open(self) -> ChunkStream:
        self._response = await self._manager.__aenter__()
        return self

    def __aiter__(self) -> AsyncIterator[Chunk]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[Chunk]:
        data: list[str] = []
        async for line in self._response.iter_lines():
            if line.startswith("data:"):
                data.append(line[6:] if line.startswith("data: ") else line[5:])
                if len(data) == 1 and data[0].startswith("{") and data[0].endswith("}"):
                    # the common case: one event per line; decode without waiting for the blank
                    chunk = self._decode(data.pop())
                    if chunk is not None:
                        yield chunk
                continue
            if line or not data:
                continue  # comments, event names, ids
            chunk = self._decode("\n".join(data))
            data.clear()
            if chunk is not None:
                yield chunk
        if data:
            chunk = self._decode("\n".join(data))
            if chunk is not None:
                yield chunk

    @staticmethod
    def _decode(payload: str) -> Chunk | None:
        if payload.startswith("[DONE]"):
            return None
        try:
            chunk = _decoder.decode(payload)
        except msgspec.DecodeError as exc:
            raise ProviderStreamError(f"the server sent an invalid stream event: {exc}") from None
        if chunk.error is not None:
            message = str(chunk.error.get("message") or chunk.error)
            raise ProviderHTTPError(f"OpenAI stream error: {message}", 500, message)
        return chunk

    async def close(self) -> None:
        if self._response is not None:
            self._response = None
            await self._manager.__aexit__(None, None, None)
