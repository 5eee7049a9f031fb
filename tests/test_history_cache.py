"""The incremental request (``providers.history``): over random histories and whatever
changes them (turns, stubs, a truncation, compaction, a model switch, a fork, a load), the
body a provider sends from the session's cache is the one built from scratch, and the
session's token estimate is the whole history's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from acp_agent.conversation import (
    AssistantMessage,
    ImagePart,
    Message,
    ReasoningPart,
    RedactedThinkingPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
    estimate_tokens,
)
from acp_agent.engine.compaction import compacted_history, cut_points
from acp_agent.engine.world import request_of
from acp_agent.providers._anthropic import AnthropicProvider
from acp_agent.providers._openai import OpenAIProvider
from acp_agent.providers._responses import ResponsesProvider
from acp_agent.providers._sdk import body_of
from acp_agent.providers.base import ModelRequest
from acp_agent.providers.history import HistoryCache, common_prefix
from acp_agent.sessions.records import Header, Record, encode, parse
from acp_agent.sessions.replay import restore
from acp_agent.sessions.session import Session
from acp_agent.tools import Toolset

from .engine_world import World

PROVIDERS: dict[str, Any] = {
    "chat (official)": OpenAIProvider("gpt-4.1", api_key="k"),
    "chat (compatible)": OpenAIProvider("qwen3", api_key="k", base_url="http://127.0.0.1:1/v1"),
    "messages": AnthropicProvider("claude-sonnet-4-5", api_key="k"),
    "responses gpt-5": ResponsesProvider("gpt-5", api_key="k"),
    "responses o3": ResponsesProvider("o3", api_key="k"),
}

words = st.text(st.sampled_from("ab \n"), max_size=6)
image = st.builds(ImagePart, st.just("aGk="), st.sampled_from(["image/png", "image/jpeg"]))
call_ids = st.sampled_from([f"c{i}" for i in range(6)])
assistant_part = st.one_of(
    st.builds(TextPart, words),
    st.builds(ThinkingPart, words, st.one_of(st.none(), st.just("sig"))),
    st.builds(RedactedThinkingPart, st.just("opaque")),
    st.builds(ReasoningPart, st.just("rs_1"), st.just("enc"), st.lists(words, max_size=1),
              st.sampled_from(["openai:gpt-5", "openai:o3"])),
    st.builds(ToolCallPart, call_ids, st.sampled_from(["read_file", "run"]),
              st.dictionaries(st.sampled_from("pq"), st.integers(0, 9), max_size=2)),
)
message: st.SearchStrategy[Message] = st.one_of(
    st.builds(UserMessage, st.lists(st.one_of(st.builds(TextPart, words), image), min_size=1,
                                    max_size=2)),
    st.builds(AssistantMessage, st.lists(assistant_part, max_size=3)),
    st.builds(ToolResultMessage, call_ids, st.sampled_from(["read_file", "run"]),
              st.lists(st.one_of(st.builds(TextPart, words), image), max_size=2),
              st.booleans()),
)


class _Log:
    """What a session records, as its log would hold it (encoded, decoded back)."""

    def __init__(self, records: list[Record]) -> None:
        self.records = records

    def append(self, record: Record) -> None:
        self.records.append(record)

    def read(self) -> list[Record]:
        return parse(b"".join(encode(r) for r in self.records))


def _session(name: str, records: list[Record]) -> Session:
    session = Session(name, "/w", _ignore)
    session.log = _Log(records)  # type: ignore[assignment]
    return session


async def _ignore(session_id: str, update: Any) -> None:
    return None


def same_request(request: ModelRequest, name: str) -> None:
    """The body sent from the cache is the body built whole, for ``name``'s provider."""
    provider = PROVIDERS[name]
    whole = msgspec.structs.replace(request, history_cache=None)
    for r, w in ((request, whole), (msgspec.structs.replace(request, tools=[]),
                                    msgspec.structs.replace(whole, tools=[]))):  # fmt: skip
        assert json.loads(provider.request_body(r)) == body_of(provider.request_params(w)), name


class Conversation(RuleBasedStateMachine):
    """One session (and a fork of it) changed at random; every request checked."""

    def __init__(self) -> None:
        super().__init__()
        self.world = World(Path("/w"))
        self.world.tools = Toolset(self.world.tools.tools()[:3])
        self.session = self.world.session = _session("sess_a", [Header(id="sess_a", cwd="/w",
                                                                       created_at="")])  # fmt: skip
        self.provider = "messages"
        self.cache_key = True

    def request(self) -> ModelRequest:
        self.world.session = self.session
        request = request_of(self.world.context())
        assert request.history_cache is self.session.history_cache
        if not self.cache_key:
            request = msgspec.structs.replace(request, cache_key=None)
        return request

    @rule(messages=st.lists(message, min_size=1, max_size=4))
    def turn(self, messages: list[Message]) -> None:
        for m in messages:
            self.session.add_message(m)

    @rule(name=st.sampled_from(sorted(PROVIDERS)), cache_key=st.booleans())
    def switch_model(self, name: str, cache_key: bool) -> None:
        self.provider, self.cache_key = name, cache_key

    @precondition(lambda self: self.session.history)
    @rule(data=st.data())
    def stub(self, data: st.DataObject) -> None:
        ids = {m.call_id for m in self.session.history if isinstance(m, ToolResultMessage)}
        if ids:
            self.session.stub_results(data.draw(st.lists(st.sampled_from(sorted(ids)),
                                                         min_size=1)))  # fmt: skip

    @precondition(lambda self: self.session.history)
    @rule(data=st.data(), then=st.lists(message, max_size=2))
    def truncate(self, data: st.DataObject, then: list[Message]) -> None:
        """A refused prompt leaves the history (and the next may follow before a request)."""
        self.session.truncate_history(data.draw(st.integers(0, len(self.session.history))))
        for m in then:
            self.session.add_message(m)

    @precondition(lambda self: bool(cut_points(self.session.history)))
    @rule(data=st.data(), summary=words)
    def compact(self, data: st.DataObject, summary: str) -> None:
        history = self.session.history
        cut = data.draw(st.sampled_from(cut_points(history)))
        self.session.replace_history(compacted_history(summary or "s", history[cut:]))

    @rule()
    def reload_in_place(self) -> None:
        """The same messages, new objects (equal, not identical)."""
        raw = msgspec.json.encode(self.session.history)
        self.session.replace_history(msgspec.json.decode(raw, type=list[Message]))

    @rule()
    def load(self) -> None:
        """A new process loads the session from its log, and goes on with it."""
        records = self.session.log.read()  # type: ignore[union-attr]
        loaded = _session(self.session.id, records)
        loaded.restore(restore(records))  # (calls left unanswered get a result)
        self.session = loaded

    @rule()
    def fork(self) -> None:
        """A fork goes on from the same history; the original is checked once more."""
        same_request(self.request(), self.provider)
        records = self.session.log.read()  # type: ignore[union-attr]
        fork = _session("sess_fork", records)
        fork.restore(restore(records))
        self.session = fork

    @invariant()
    def requests_are_built_as_from_scratch(self) -> None:
        request = self.request()
        same_request(request, self.provider)
        session = self.session
        assert session.history_tokens() == estimate_tokens(session.history)
        cache = request.history_cache
        assert cache is not None
        assert cache.tokens(request.messages, request.system) == estimate_tokens(
            request.messages, request.system
        )


TestConversation = Conversation.TestCase
TestConversation.settings = settings(
    max_examples=60, stateful_step_count=25, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)  # fmt: skip


def test_every_format_from_one_cache_matches_scratch() -> None:
    """One cache serving every format in turn (a model switch back and forth, more
    formats than it keeps) while the history grows."""
    cache = HistoryCache()
    history: list[Message] = []
    for i in range(12):
        history += [UserMessage([TextPart(f"q{i}")]),
                    AssistantMessage([ToolCallPart(f"c{i}", "run", {"n": i})]),
                    ToolResultMessage(f"c{i}", "run",
                                      [TextPart("out"), ImagePart("aGk=", "image/png")])]
        for name in sorted(PROVIDERS)[i % 3 :]:
            request = ModelRequest(system="sys", messages=list(history), cache_key="s",
                                   history_cache=cache)  # fmt: skip
            same_request(request, name)


def test_common_prefix_finds_the_first_difference() -> None:
    a, b, c = (UserMessage([TextPart(x)]) for x in "abc")
    assert common_prefix([a, b], [a, b, c]) == 2
    assert common_prefix([a, b, c], [a, b]) == 2
    assert common_prefix([a, b, c], [a, c, c]) == 1
    assert common_prefix([a, UserMessage([TextPart("b")])], [a, b]) == 2  # equal, not identical
    assert common_prefix([], [a]) == 0
