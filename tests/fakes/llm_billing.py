"""What the vendors bill for a prompt, prompt caching included, and the rules they enforce
on ``cache_control``: the fake model server's billing (``FakeLLMServer(billing=True)``).

Tokens. The fake has no tokenizer: a *part* of a prompt counts ``ceil(len(json) / 4)``
tokens, ``json`` being its canonical JSON (sorted keys, no spaces, UTF-8 kept, without its
``cache_control``). Deterministic, and proportional to what the part weighs. Anthropic's
parts are the tool definitions, the system blocks (a string is one block) and each message's
content blocks (a string is one text block), in that order; OpenAI's are the tool
definitions, then each message.

Anthropic (explicit breakpoints, as documented in "Prompt caching"):

* a block carrying ``cache_control`` is a breakpoint: the prefix up to and including it
  may be cached. More than four breakpoints, or one on a thinking block or an empty text
  block, is an HTTP 400 ``invalid_request_error`` (:func:`cache_control_error`);
* a prefix shorter than the model's minimum (1,024 tokens; 2,048 or 4,096 for some
  models, :data:`MIN_CACHEABLE`) is never cached, and no error says so;
* read: for each breakpoint, the longest prefix ending at it or at one of the blocks
  before it, up to :data:`LOOKBACK` blocks in all, that an earlier request cached;
* write: from the end of the read to the last cacheable breakpoint; then the prefix of
  every cacheable breakpoint is cached;
* ``input_tokens`` is the rest (reported without reads and writes, in ``message_start``);
* the ``thinking`` parameter is part of the messages' prefix: changing it keeps tools and
  system cached, not the messages;
* entries do not expire (the API's five minutes, renewed by every read, outlast a test).
  Top-level ``cache_control`` (automatic caching) is not modelled.

OpenAI (automatic caching): every request's prompt is cached; ``cached_tokens`` is the
longest prefix of whole parts an earlier request sent under the same ``prompt_cache_key``
(requests without a key share one scope), rounded down to 128 tokens, and 0 below 1,024.
The parts: Chat Completions' tool definitions then messages; the Responses API's
instructions, tool definitions, then input items. A scope holds the prefixes of at most
:data:`OPENAI_SCOPE_PREFIXES` prompts, the oldest forgotten first (requests without a key
spread over many servers: one server's cache does not hold every session's prompts).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

MAX_BREAKPOINTS = 4
LOOKBACK = 20
MIN_CACHEABLE: tuple[tuple[str, int], ...] = (
    ("claude-opus-4-5", 4096),
    ("claude-opus-4-6", 4096),
    ("claude-haiku-4-5", 4096),
    ("claude-sonnet-4-6", 2048),
    ("claude-3-5-haiku", 2048),
    ("claude-3-haiku", 2048),
)
"""Minimum cacheable prefix by model-name prefix; 1,024 tokens for the others."""
OPENAI_MIN_CACHED = 1024
OPENAI_INCREMENT = 128
OPENAI_SCOPE_PREFIXES = 8
"""Prompts whose prefixes one ``prompt_cache_key`` scope remembers (the fake's model of
one server's cache: see the module's docstring)."""


def canonical(part: Any) -> str:
    if isinstance(part, dict):
        part = {k: v for k, v in part.items() if k != "cache_control"}
    return json.dumps(part, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def tokens(text: str) -> int:
    return -(-len(text) // 4)


@dataclass(frozen=True)
class Bill:
    """One request's prompt as billed; ``input`` counts everything, cached parts included."""

    vendor: str
    model: str
    input: int
    cached: int = 0
    cache_write: int = 0

    @property
    def fresh(self) -> int:
        return self.input - self.cached - self.cache_write


@dataclass
class Billing:
    """The caches of one account, and the bill of every request in order."""

    bills: list[Bill] = field(default_factory=list)
    _anthropic: dict[str, int] = field(default_factory=dict)  # prefix hash -> tokens
    _openai: dict[str | None, list[set[str]]] = field(default_factory=dict)  # scope -> prompts

    def bill(self, vendor: str, body: dict[str, Any]) -> Bill:
        model = str(body.get("model", ""))
        if vendor == "anthropic":
            bill = self._anthropic_bill(model, body)
        else:
            bill = self._openai_bill(model, body)
        self.bills.append(bill)
        return bill

    # ------------------------------------------------------------------ Anthropic

    def _anthropic_bill(self, model: str, body: dict[str, Any]) -> Bill:
        parts, messages_start = anthropic_parts(body)
        sizes = [tokens(canonical(p)) for p in parts]
        ends = _cumulative(sizes)
        thinking = "thinking:" + canonical(body.get("thinking"))
        hashes = _chain(model, [canonical(p) for p in parts], {messages_start: thinking})
        minimum = min_cacheable(model)
        breakpoints = [i for i, p in enumerate(parts) if _marked(p) and ends[i] >= minimum]
        read = 0
        for b in breakpoints:
            for j in range(b, max(-1, b - LOOKBACK), -1):
                if hashes[j] in self._anthropic:
                    read = max(read, ends[j])
                    break
        write = max(0, ends[breakpoints[-1]] - read) if breakpoints else 0
        for b in breakpoints:
            self._anthropic[hashes[b]] = ends[b]
        return Bill("anthropic", model, sum(sizes), read, write)

    # ------------------------------------------------------------------ OpenAI

    def _openai_bill(self, model: str, body: dict[str, Any]) -> Bill:
        instructions = [{"instructions": body["instructions"]}] if body.get("instructions") else []
        items = body.get("messages") or body.get("input") or []  # Chat or Responses
        parts = [*instructions, *(body.get("tools") or []), *items]
        texts = [canonical(p) for p in parts]
        ends = _cumulative([tokens(t) for t in texts])
        hashes = _chain(model, texts, {})
        key = body.get("prompt_cache_key")
        prompts = self._openai.setdefault(key if isinstance(key, str) else None, [])
        seen = set().union(*prompts)
        matched = next((ends[i] for i in reversed(range(len(parts))) if hashes[i] in seen), 0)
        cached = matched // OPENAI_INCREMENT * OPENAI_INCREMENT
        if cached < OPENAI_MIN_CACHED:
            cached = 0
        total = ends[-1] if ends else 0
        if total >= OPENAI_MIN_CACHED:
            prompts.append(set(hashes))
            del prompts[:-OPENAI_SCOPE_PREFIXES]
        return Bill("openai", model, total, cached)


def anthropic_parts(body: dict[str, Any]) -> tuple[list[Any], int]:
    """The prompt's parts in the order the API renders them, and where the messages start."""
    parts: list[Any] = list(body.get("tools") or [])
    system = body.get("system")
    if isinstance(system, str):
        parts.append({"type": "text", "text": system})
    elif isinstance(system, list):
        parts.extend(system)
    start = len(parts)
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            parts.append({"type": "text", "text": content, "role": message.get("role")})
        else:
            parts.extend(content or [])
    return parts, start


def min_cacheable(model: str) -> int:
    return next((n for prefix, n in MIN_CACHEABLE if model.startswith(prefix)), 1024)


def cache_control_error(body: dict[str, Any]) -> str | None:
    """The API's 400 message for breakpoints it refuses, or None."""
    parts, start = anthropic_parts(body)
    marked = [p for p in parts if _marked(p)]
    for part in parts:
        if isinstance(part, dict) and part.get("type") == "tool_result":
            inner = part.get("content")
            marked += [b for b in inner if _marked(b)] if isinstance(inner, list) else []
    if len(marked) > MAX_BREAKPOINTS:
        return (f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                f"Found {len(marked)}.")  # fmt: skip
    for i, part in enumerate(parts):
        if not _marked(part):
            continue
        where = f"messages block {i - start}" if i >= start else f"block {i}"
        if part.get("type") in ("thinking", "redacted_thinking"):
            return f"{where}: {part['type']}.cache_control: Extra inputs are not permitted"
        if part.get("type") == "text" and not part.get("text"):
            return f"{where}: cache_control cannot be set for empty text blocks"
    return None


def _marked(part: Any) -> bool:
    return isinstance(part, dict) and part.get("cache_control") is not None


def _cumulative(sizes: list[int]) -> list[int]:
    out, total = [], 0
    for size in sizes:
        total += size
        out.append(total)
    return out


def _chain(seed: str, texts: list[str], mixed_in: dict[int, str]) -> list[str]:
    """Prefix hashes: ``out[i]`` stands for parts ``0..i`` (and whatever was mixed in
    before a part: a parameter that belongs to the prefix from there on)."""
    h = hashlib.sha256(seed.encode())
    out = []
    for i, text in enumerate(texts):
        if i in mixed_in:
            h.update(b"\0" + mixed_in[i].encode())
        h.update(b"\0" + text.encode())
        out.append(h.copy().hexdigest())
    return out
