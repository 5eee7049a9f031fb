"""What a session offers and is given beyond what it records itself: the slash commands
it offers besides the built-ins (prompt commands, skills: protocols that the handlers'
command files and the engine's skills meet) and the client's ``systemPrompt``."""

from __future__ import annotations

from typing import Protocol

import msgspec


class ClientPrompt(msgspec.Struct, frozen=True):
    """A client's ``systemPrompt``: ``append`` or ``override``, and its text (kept in the
    log as an ``Instructions`` record; ``engine.instructions`` composes it)."""

    mode: str
    text: str


class PromptCommand(Protocol):
    """A slash command the session offers besides the built-ins (``handlers.commands``
    loads them): what ``available_commands_update`` lists and what the prompt becomes."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def hint(self) -> str | None: ...
    def expand(self, arguments: str) -> str: ...


class SkillEntry(PromptCommand, Protocol):
    """An Agent Skill (``engine.skills``): a prompt command with a ``SKILL.md``."""

    @property
    def path(self) -> str: ...
