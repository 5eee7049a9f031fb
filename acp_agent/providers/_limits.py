"""What an OpenAI-compatible server says about the model it serves, and keeping a request's
output within what is left of that window.

Asked once per model, off the ``initialize`` path (before the model's first turn), within
a short time limit, through the provider's own SDK client (its key, headers, base URL):

* ``GET {base}/models``: vLLM lists ``max_model_len`` for each served model (others
  ``context_length``). The server enforces it: prompt plus ``max_tokens`` beyond it is a 400.
* ``POST {root}/api/show`` (Ollama, when the list says nothing): ``num_ctx`` among the
  model's parameters is the window it runs with; without it only the trained
  ``<arch>.context_length`` is known, an upper bound (Ollama's own default depends on the
  machine's memory and it truncates silently rather than refusing).

Anything else (no such route, no entry, a refused connection, no answer in time) means the
server does not say: the table and ``model-overrides`` decide, as before.
"""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING, Any

import msgspec

from .. import log
from ..conversation import estimate_tokens
from .base import ModelRequest
from .models import ServerLimits

if TYPE_CHECKING:
    from openai import AsyncOpenAI

DISCOVERY_TIMEOUT = 3.0
"""Seconds the whole discovery may take before the first request goes ahead without it."""

_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)", re.MULTILINE)


class _Listed(msgspec.Struct):
    id: str = ""
    max_model_len: int | None = None  # vLLM
    context_length: int | None = None  # OpenRouter-style listings, llama-swap...
    context_window: int | None = None


class _Listing(msgspec.Struct):
    data: list[_Listed] = []


class _Show(msgspec.Struct):
    parameters: str = ""
    model_info: dict[str, Any] = {}


class Unanswered(Exception):
    """No HTTP answer came to the discovery (a refused connection, no answer in time)."""


async def discover(
    client: AsyncOpenAI, model: str, base_url: str, timeout: float = DISCOVERY_TIMEOUT
) -> ServerLimits | None:
    """The model's limits as the server at ``base_url`` reports them, or ``None``; raises
    :class:`Unanswered` when its list got no HTTP answer at all."""
    answered = False  # the list was answered (a later Ollama question may still hang)
    try:
        async with asyncio.timeout(timeout):
            listed = await _listed(client, model, timeout)
            answered = True
            return listed or await _ollama(client, model, base_url, timeout)
    except Exception as exc:  # the server does not say; the request itself will tell more
        log.debug("no model limits from the server", model=model, reason=repr(exc))
        if answered:
            return None
        raise Unanswered(repr(exc)) from exc


async def _listed(client: AsyncOpenAI, model: str, timeout: float) -> ServerLimits | None:
    try:
        raw = await client.get("/models", cast_to=bytes, options={"timeout": timeout})
        listing = msgspec.json.decode(raw, type=_Listing)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    except Exception as exc:
        if getattr(exc, "status_code", None) is None:  # not an HTTP answer: nothing to try
            raise
        return None  # no such route: maybe Ollama's own API answers
    for entry in listing.data:
        if entry.id == model:
            for name in ("max_model_len", "context_length", "context_window"):
                value = getattr(entry, name)
                if isinstance(value, int) and value > 0:
                    return ServerLimits(context_window=value, source=f"GET /models {name}")
    return None


async def _ollama(
    client: AsyncOpenAI, model: str, base_url: str, timeout: float
) -> ServerLimits | None:
    root = base_url.rstrip("/").removesuffix("/v1")
    try:
        raw = await client.post(
            f"{root}/api/show", cast_to=bytes, body={"model": model}, options={"timeout": timeout}
        )
        show = msgspec.json.decode(raw, type=_Show)
    except Exception:
        return None
    if (found := _NUM_CTX.search(show.parameters)) is not None:
        return ServerLimits(context_window=int(found.group(1)), source="Ollama num_ctx")
    for key, value in show.model_info.items():
        if key.endswith(".context_length") and isinstance(value, int) and value > 0:
            return ServerLimits(context_window=value, exact=False, source=f"Ollama {key}")
    return None


def fit_output(request: ModelRequest, limits: ServerLimits | None) -> ModelRequest:
    """``request`` with ``max_tokens`` no larger than what the server's window leaves after
    the prompt (estimated on the generous side, about three characters a token). Only for a
    window the server enforces; ``max_tokens=None`` stays (the server then fills the rest)."""
    if limits is None or not limits.exact or request.max_tokens is None:
        return request
    cache = request.history_cache
    if cache is not None:
        prompt = cache.tokens(request.messages, request.system) * 4 // 3
    else:
        prompt = estimate_tokens(request.messages, request.system) * 4 // 3
    prompt += len(msgspec.json.encode(request.tools)) // 3 if request.tools else 0
    room = max(1, limits.context_window - prompt)
    if request.max_tokens <= room:
        return request
    return msgspec.structs.replace(request, max_tokens=room)
