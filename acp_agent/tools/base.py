"""The tool seam: what a tool (built-in or MCP) looks like to the turn engine.

A call goes ``parse`` (the model's JSON object -> typed arguments, or a
:class:`~acp_agent.errors.ToolError` the model reads) -> ``describe`` (title, locations,
the access it needs, the paths and command it touches: everything the user and the
permission policy see before it runs) -> ``run``. A tool knows nothing of
providers; it reaches the editor only through the :class:`~acp_agent.client.Client` in
its :class:`ToolContext` and reports a :class:`ToolOutput`: ACP content for the user,
text (and images) for the model.

Built-in tools derive from :class:`BuiltinTool`, which turns one msgspec ``Struct`` of
arguments into both the validation and the JSON Schema the model sees.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeAlias, TypeVar

import msgspec

from ..client import Client
from ..conversation import ImagePart, ToolSpec
from ..errors import ToolError
from ..protocol import types as t

if TYPE_CHECKING:
    from .sandbox import Sandbox
    from .usershell import LoginEnvironment
    from .webfetch import WebSettings

ToolKind: TypeAlias = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"
]

#: What the permission policy needs to know about one call.
Access: TypeAlias = Literal["read", "write", "execute", "none"]


@dataclass(slots=True)
class ToolContext:
    session_id: str
    cwd: str
    roots: list[str]
    client: Client
    tool_call_id: str
    emit: Callable[[t.SessionUpdate], Awaitable[None]]
    """Send a session update for this session (progress, plans)."""
    env: Mapping[str, str] | None = None
    """The environment of processes started for the model (``None``: inherit ours);
    the turn passes it without the agent's secrets (see ``childenv``)."""
    images: bool = False
    """The model accepts images (read_file returns an image as one)."""
    sandbox: Sandbox | None = None
    """The fence of the commands this call starts (``tools.sandbox``; its level follows
    the mode: ``permissions.command_level``); ``None``: none."""
    login_env: Callable[[], Awaitable[LoginEnvironment]] | None = None
    """The session's login-shell environment (read once, on first use: ``usershell``);
    commands run with it on the local route. ``None``: with ``env``."""
    web: WebSettings | None = None
    """What web_fetch may do (``None``: web access is off)."""
    outputs: str | None = None
    """The session's directory of saved command outputs (``output``): read without asking;
    ``None``: outputs are not saved."""
    prepared: Any = None
    """What ``Tool.prepare`` worked out for this call (its ``Preview.state``)."""
    checked: dict[str, str] = field(default_factory=dict)
    """Each path the permission policy judged -> the real path it judged (symlinks
    resolved once): the tool operates on that, not on a fresh resolution."""

    def resolve(self, path: str) -> str:
        """An absolute, normalised path; relative paths resolve against the session cwd."""
        if "\0" in path:
            raise ToolError("a path must not contain a NUL character")
        return os.path.normpath(path if os.path.isabs(path) else os.path.join(self.cwd, path))

    def check(self, path: str) -> str:
        """Resolve ``path`` once (symlinks included) and remember what was checked."""
        real = self.checked.get(path)
        if real is None:
            real = self.checked[path] = os.path.realpath(self.resolve(path))
        return real

    def real(self, path: str) -> str:
        """The real path to operate on: the one checked, else resolved now."""
        resolved = self.resolve(path)
        return self.checked.get(resolved) or os.path.realpath(resolved)

    def inside_roots(self, path: str) -> bool:
        """Whether ``path`` (after resolving symlinks) lies inside the session's roots."""
        real = self.real(path)
        return any(within(real, os.path.realpath(root)) for root in self.roots)

    def saved_output(self, path: str) -> bool:
        """Whether ``path`` (after resolving symlinks) is one of the session's saved
        command outputs (reading them asks nothing)."""
        return self.outputs is not None and within(self.real(path), os.path.realpath(self.outputs))

    def display(self, path: str) -> str:
        """Project-relative form of ``path`` for titles."""
        abs_path = self.resolve(path)
        rel = os.path.relpath(abs_path, self.cwd)
        return abs_path if rel.startswith("..") else rel


def within(path: str, directory: str) -> bool:
    """Whether ``path`` is ``directory`` or lies below it (both absolute and real)."""
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


@dataclass(frozen=True, slots=True)
class CallInfo:
    """What one call will do, known before it runs."""

    title: str
    access: Access = "none"
    paths: tuple[str, ...] = ()
    """The absolute paths it touches (judged against the session's roots)."""
    locations: tuple[t.ToolCallLocation, ...] = ()
    command: str | None = None
    """The command line it runs, if it runs one (an "always" answer covers exactly it)."""
    host: str | None = None
    """The web host it reaches (web_fetch): judged as a read outside the roots, an
    "always" answer covering that host."""
    content: tuple[Any, ...] = ()
    """What the user is shown before approving (``Tool.prepare``'s preview: a diff)."""
    sandbox: str | None = None
    """The sandbox level the command runs at (``None``: unsandboxed); ``auto`` runs a
    sandboxed command unasked, and an "always" answer covers it at that level only."""
    leaving: bool = False
    """The model asks to run the command outside the sandbox (always asked)."""


@dataclass(frozen=True, slots=True)
class Preview:
    """What a call will do, worked out before it is approved: ``content`` (ACP tool-call
    content, e.g. the diff) is shown with the permission question; ``state`` reaches
    ``run`` as ``ToolContext.prepared`` (so the change approved is the change made)."""

    content: list[Any] = field(default_factory=list)
    state: Any = None


@dataclass(slots=True)
class ToolOutput:
    text: str
    """What the model reads."""
    content: list[Any] = field(default_factory=list)
    """ACP ``ToolCallContent`` for the user; defaults to ``text`` as one text block."""
    raw_output: Any = None
    images: list[ImagePart] = field(default_factory=list)
    locations: list[t.ToolCallLocation] | None = None
    is_error: bool = False
    """The call failed although it ran (a command that timed out or was killed): the
    model reads it as an error, the user sees the call failed."""


class Tool(Protocol):
    @property
    def spec(self) -> ToolSpec:
        """Name, description and JSON Schema, as offered to the model."""
        ...

    @property
    def kind(self) -> ToolKind: ...

    @property
    def concurrent(self) -> bool:
        """Several calls in one response may run side by side (subagents)."""
        ...

    def parse(self, raw: Mapping[str, Any]) -> Any:
        """Typed arguments from the model's object; raises :class:`ToolError`."""
        ...

    def describe(self, args: Any, ctx: ToolContext) -> CallInfo: ...

    def describe_partial(self, members: Mapping[str, Any], ctx: ToolContext) -> CallInfo | None:
        """What :meth:`describe` will say, from the members of the arguments the model has
        completed so far (it is still writing the rest); ``None`` until that is known."""
        ...

    async def prepare(self, args: Any, ctx: ToolContext) -> Preview | None:
        """Work out the change before it is approved (``None``: nothing to show);
        raises :class:`ToolError` for a call that cannot succeed."""
        ...

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutput: ...


class Toolset:
    def __init__(self, tools: list[Tool]) -> None:
        self._tools = {tool.spec.name: tool for tool in tools}

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def tools(self) -> list[Tool]:
        return list(self._tools.values())

    def specs(self) -> list[ToolSpec]:
        return [tool.spec for tool in self._tools.values()]

    def __contains__(self, name: object) -> bool:
        return name in self._tools


# ---------------------------------------------------------------------- built-in tools


class Arguments(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Base of a tool's arguments: its fields (with ``Annotated`` constraints and
    descriptions) are the JSON Schema; unknown fields are an error the model reads."""


A = TypeVar("A", bound=Arguments)


class BuiltinTool(Generic[A]):
    """A tool described by class attributes: ``name``, ``description``, ``kind``,
    ``arguments`` (its :class:`Arguments` type), ``concurrent`` and ``streamed``."""

    name: str
    description: str
    kind: ToolKind
    arguments: type[A]
    concurrent: bool = False
    streamed: tuple[str, ...] = ()
    """Bulky string arguments (a file's content) that :meth:`describe` never reads: while
    the model is still writing them, the call is described without them."""
    grammar: str | None = None
    """A free-text tool's Lark grammar (see ``ToolSpec.grammar``)."""

    @functools.cached_property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, json_schema(self.arguments), self.grammar)

    def parse(self, raw: Mapping[str, Any]) -> A:
        # A null stands for "not given" (models often send it for optional fields).
        given = {k: v for k, v in raw.items() if v is not None}
        try:
            return msgspec.convert(given, self.arguments, strict=False)
        except msgspec.ValidationError as exc:
            raise ToolError(f"invalid arguments: {exc}. {self.usage()}") from None

    def describe_partial(self, members: Mapping[str, Any], ctx: ToolContext) -> CallInfo | None:
        given = {k: v for k, v in members.items() if v is not None}
        for name in self.streamed:
            given.setdefault(name, "\u2026")  # a stand-in (non-empty) that describe never reads
        try:
            return self.describe(msgspec.convert(given, self.arguments, strict=False), ctx)
        except (msgspec.ValidationError, ToolError, ValueError, TypeError, KeyError):
            return None  # a required member is still being written, or it is wrong

    def usage(self) -> str:
        """One line naming the parameters, for error messages."""
        schema = self.spec.parameters
        required = set(schema.get("required", ()))
        names = [n + ("" if n in required else "?") for n in schema.get("properties", {})]
        return f"{self.name} takes: {', '.join(names) or 'no arguments'}."

    def describe(self, args: A, ctx: ToolContext) -> CallInfo:
        raise NotImplementedError

    async def prepare(self, args: A, ctx: ToolContext) -> Preview | None:
        return None

    async def run(self, args: A, ctx: ToolContext) -> ToolOutput:
        raise NotImplementedError


@functools.cache
def json_schema(arguments: type[Arguments]) -> dict[str, Any]:
    """The JSON Schema object of an :class:`Arguments` type, self-contained (no ``$ref``),
    without msgspec's titles, string enums typed: the form every vendor accepts."""
    full = msgspec.json.schema(arguments)
    defs = full.get("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return inline(defs[ref[len("#/$defs/") :]])
            out = {
                k: named(v) if k == "properties" else inline(v)
                for k, v in node.items()
                if k not in ("title", "discriminator")  # msgspec's (its mapping holds $refs)
            }
            enum = out.get("enum")
            if isinstance(enum, list) and all(isinstance(e, str) for e in enum):
                out.setdefault("type", "string")
            return out
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    def named(node: Any) -> Any:
        """A ``properties`` mapping: its keys are names (a field may be called "title")."""
        if isinstance(node, dict):
            return {k: inline(v) for k, v in node.items()}
        return inline(node)

    schema: dict[str, Any] = inline(full)
    schema.pop("$defs", None)
    schema.setdefault("properties", {})
    return schema
