"""What every part of the agent shares: the configuration, the editor, the open sessions,
the store, the providers, the remembered permission answers; and the factory of a turn's
world (:meth:`Runtime.turn_context`).

No protocol handler lives here: ``agent`` routes, ``lifecycle`` opens and closes
sessions, ``prompting`` runs prompts, ``options`` changes modes and options,
``commands`` dispatches slash commands, ``compaction`` compacts. Heavy modules (sessions,
the store, tools, the turn engine) are imported on first use, never on the way to the
``initialize`` reply.
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .. import log
from ..client import ClientProxy
from ..config import Config, default_state_dir
from ..errors import ProviderError, SessionNotFound
from ..protocol import UNSET
from ..protocol import types as t

if TYPE_CHECKING:
    from ..client import Client
    from ..engine.permissions import Rules
    from ..engine.subagents import Subagents
    from ..engine.turn import TurnContext
    from ..providers.base import ModelProvider
    from ..providers.models import ModelInfo, ServerLimits
    from ..providers.resilient import Resilient, RetryPolicy
    from ..sessions.session import Session
    from ..sessions.store import Store
    from ..tools import Toolset


SHOW_WAIT_AFTER = 2.0
"""Seconds: a retry wait this long is shown as an agent message to a client without notices."""


@runtime_checkable
class Prepares(Protocol):
    """A provider that can ready its first request ahead of time (``_openai``,
    ``_anthropic``): called in a worker thread, never on the event loop."""

    def prepare(self, rehearse_request: bool = True) -> None: ...


@runtime_checkable
class Connects(Protocol):
    """A provider that can open its connection ahead of a prompt (``providers._sdk.Ahead``)."""

    async def connect(self) -> None: ...


class Runtime:
    def __init__(
        self, config: Config, client: ClientProxy, warm: Callable[[], None] | None = None
    ) -> None:
        self.config = config
        self.client = client
        self.sessions: dict[str, Session] = {}
        """The client's own sessions open in this process (subagents live elsewhere)."""
        self._warm = warm
        self._warming: asyncio.Future[None] | None = None
        self.opened = threading.Event()
        """Set once a session is open here (the warm-up imports the SDK after that)."""
        self._waiting = 0  # turns waiting for the warm-up
        self._prepared: set[str] = set()  # models whose provider readied its first request
        self._prebuilt: weakref.WeakKeyDictionary[Session, tuple[str, str, str]] = (
            weakref.WeakKeyDictionary()
        )  # a session's system prompt built before its first turn, with its mode and model
        self._store: Store | None = None
        self._store_lock = threading.Lock()
        self._providers: dict[str, ModelProvider] = {}
        self._retired: list[ModelProvider] = []
        self.disabled: set[str] = set()
        """Provider families the client disabled (``providers/disable``): their models are
        neither offered nor used."""
        self._server_limits: dict[str, ServerLimits | None] = {}
        self._rules: dict[str, Rules] = {}
        self._tools: Toolset | None = None
        self._subagents: Subagents | None = None
        self._tasks: set[asyncio.Future[Any]] = set()
        self.turn_deadlines: dict[asyncio.Timeout, float] = {}
        """Running turns' ``limits.turn-timeout`` deadlines, with the loop time each turn
        started (``reload`` bounds them again)."""

    # ------------------------------------------------------------------ shared objects

    @property
    def store(self) -> Store:
        """The sessions on disk, listed through their index (``sessionindex``). Built on
        first use, by the loop or the warm-up thread, whichever comes first."""
        if self._store is None:
            with self._store_lock:
                if self._store is None:
                    from ..sessions.sessionindex import SessionIndex
                    from ..sessions.store import Store

                    state_dir = self.config.state_dir or default_state_dir()
                    self._store = Store(state_dir, index=SessionIndex(state_dir))
        return self._store

    def _ready_store(self) -> None:
        """The store and its index open (a worker thread): ``session/new`` does not wait
        for the database."""
        from ..sessions.sessionindex import SessionIndex

        index = self.store.index
        if isinstance(index, SessionIndex):
            index.open()

    @property
    def subagents(self) -> Subagents:
        if self._subagents is None:
            from ..engine.subagents import Subagents

            self._subagents = Subagents(self.client, self.turn_context, self.sessions)
        return self._subagents

    @property
    def has_subagents(self) -> bool:
        return self._subagents is not None

    def session(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise SessionNotFound(session_id)
        return session

    @property
    def models(self) -> list[str]:
        """The models a session may switch between (the configured one first)."""
        seen = [self.config.model]
        for m in self.config.models:
            if m not in seen and m.partition(":")[0] not in self.disabled:
                seen.append(m)
        return seen

    def provider_for(self, model: str) -> ModelProvider:
        provider = self._providers.get(model)
        if provider is None:
            from ..providers import make_provider, spec

            family = model.partition(":")[0]
            if family in self.disabled:
                raise ProviderError(
                    f"the client disabled the {spec(family).title} provider: {model} cannot"
                    " be used (choose another model)"
                )
            provider = self._providers[model] = make_provider(self.config, model)
        return provider

    def reroute(self, family: str) -> None:
        """``family``'s endpoint or key changed (``providers/set``/``disable``, ``logout``):
        its models get new providers, built for their next request; a turn streaming now
        keeps its own (closed at shutdown)."""
        for model in [m for m in self._providers if m.partition(":")[0] == family]:
            self._retired.append(self._providers.pop(model))
            self._server_limits.pop(model, None)

    def model_info_for(self, model: str) -> ModelInfo:
        """The table's facts, within what the model's server said (once asked: see
        :meth:`learn_limits`), with the configuration's override on top."""
        from ..providers import spec

        family, _, name = model.partition(":")
        info = spec(family).model_info(name)
        limits = self._server_limits.get(model)
        if limits is not None:
            from ..providers.models import with_server_limits

            info = with_server_limits(info, limits)
        overrides = self.config.model_overrides
        override = overrides.get(model) or overrides.get(name)
        if override is not None:
            import msgspec

            changes = {k: v for k, v in msgspec.structs.asdict(override).items() if v is not None}
            info = msgspec.structs.replace(info, **changes)
        return info

    def _model_facts(self, session: Session) -> ModelInfo:
        info = self.model_info_for(session.model)
        if session.window_limit and session.window_limit < info.context_window:
            import msgspec

            info = msgspec.structs.replace(info, context_window=session.window_limit)
        return info

    def window(self, session: Session) -> int:
        """The session model's context window: the table's (or the configuration's), or
        less when the server said so in a context-length error."""
        window = self.model_info_for(session.model).context_window
        return min(window, session.window_limit) if session.window_limit else window

    async def learn_limits(self, model: str) -> None:
        """Ask the model's server for its limits, once per model (a compatible server's
        window; the vendors' own APIs are not asked). Before the model's first turn, never
        on the way to ``initialize``; bounded by the provider's short discovery timeout."""
        from ..providers.models import ReportsLimits

        if model in self._server_limits:
            return
        provider = self.provider_for(model)
        limits = await provider.server_limits() if isinstance(provider, ReportsLimits) else None
        if limits is not None:
            log.info("model limits from the server", model=model, window=limits.context_window,
                     exact=limits.exact, source=limits.source)  # fmt: skip
        self._server_limits[model] = limits

    async def rules_for(self, session: Session) -> Rules:
        """The project's remembered "always" answers (shared by its sessions, persisted)."""
        from ..engine.permissions import Rules

        root = session.root
        rules = self._rules.get(root.cwd)
        if rules is None:
            store = self.store
            state_dir = os.path.dirname(store.root)
            loaded = await asyncio.to_thread(
                Rules.for_project, state_dir, root.cwd, store.writer.submit
            )
            rules = self._rules.setdefault(root.cwd, loaded)
        return rules

    def tools_for(self, session: Session) -> Toolset:
        """The built-in tools and the session's MCP tools (which of them the model is
        offered depends on the mode: ``permissions.offered``); ``ask_user`` only for a
        client that takes form elicitations. MCP tools follow the servers' changes."""
        from ..client import elicitation_modes
        from ..tools import Toolset, builtin_tools
        from ..tools.ask import NAME as ASK_USER

        if self._tools is None:  # after initialize: the client's capabilities are known
            tools = builtin_tools(self.subagents.tool).tools()
            if "form" not in elicitation_modes(self.client.capabilities):
                tools = [tool for tool in tools if tool.spec.name != ASK_USER]  # asks by a form
            self._tools = Toolset(tools)
        if session.mcp is None:
            return self._tools
        return session.mcp.toolset(self._tools)

    @functools.cached_property
    def child_env(self) -> dict[str, str]:
        """The environment of commands run for the model: ours without the secrets."""
        from ..engine.childenv import child_environ

        return child_environ(self.config)

    # ------------------------------------------------------------------ model requests

    @property
    def retry_policy(self) -> RetryPolicy:
        from ..providers.resilient import RetryPolicy

        limits = self.config.limits
        return RetryPolicy(
            max_retries=limits.max_retries,
            max_delay=limits.retry_max_delay,
            first_event_timeout=limits.first_event_timeout,
            idle_timeout=limits.idle_timeout,
        )

    def provider(self, session: Session) -> Resilient:
        """The session's model behind the resilience policy. Every retry is announced with
        a notice; a client without notices is told of waits of ``SHOW_WAIT_AFTER`` seconds
        or more by an agent message, so nobody waits on a rate limit in silence."""
        from ..providers.resilient import Resilient

        policy = self.retry_policy

        async def on_retry(exc: ProviderError, attempt: int, delay: float) -> None:
            limited = getattr(exc, "status", None) == 429
            title = "Rate limited; waiting" if limited else "Model request failed; retrying"
            await self.notify(
                session,
                "warning",
                title,
                f"{exc.message.rstrip('.')}. Retry {attempt} of {policy.max_retries}"
                f" in {_seconds(delay)}.",
                fallback=delay >= SHOW_WAIT_AFTER,
            )

        return Resilient(self.provider_for(session.model), policy, on_retry)

    async def turn_context(self, session: Session, client: Client | None = None) -> TurnContext:
        """Everything a turn of ``session`` needs (``client``: the editor as this
        session sees it; a subagent's view differs)."""
        await self.warmed()  # first: the imports below may be the warm-up's, half done
        from ..conversation import TextPart, UserMessage
        from ..engine.compaction import make_room, maybe_compact
        from ..engine.context import frame_tokens, prune
        from ..engine.instructions import mode_note, system_prompt
        from ..engine.turn import TurnContext, TurnLimits

        async def notify(severity: str, title: str, description: str | None) -> None:
            await self.notify(session, severity, title, description)

        await self.learn_limits(session.model)

        async def before_request() -> None:
            note = mode_note(session)  # the mode changed since the model was told
            if note is not None:
                session.add_message(UserMessage([TextPart(note)]))
            prune(session, self.window(session), self.config.limits.prune_at)
            await maybe_compact(self, session)

        tools = self.tools_for(session)
        ahead = self._prebuilt.pop(session, None)
        if ahead and session.system_text is ahead[0] and (session.mode, session.model) != ahead[1:]:
            session.system_text = None  # changed since it was built ahead: build it now
        system = await system_prompt(session, configured=self.config.system_prompt)
        session.frame_tokens = frame_tokens(system, tools.specs())
        return TurnContext(
            session=session,
            client=client or self.client,
            provider=self.provider(session),
            model=self._model_facts(session),
            tools=tools,
            rules=await self.rules_for(session),
            system=system,
            limits=TurnLimits(
                max_turn_requests=self.config.limits.max_turn_requests,
                prompt_cache=self.config.limits.prompt_cache,
            ),
            notify=notify,
            before_request=before_request,
            env=self.child_env,
            make_room=lambda error: make_room(self, session, error),
        )

    # ------------------------------------------------------------------ telling the user

    def _session_caps(self) -> t.ClientSessionCapabilities | None:
        caps = self.client.capabilities.session
        return caps if isinstance(caps, t.ClientSessionCapabilities) else None

    @property
    def shows_notices(self) -> bool:
        caps = self._session_caps()
        return caps is not None and isinstance(caps.notices, t.NoticeCapabilities)

    @property
    def shows_compaction(self) -> bool:
        caps = self._session_caps()
        return caps is not None and isinstance(caps.compaction, t.CompactionCapabilities)

    async def notify(
        self,
        session: Session,
        severity: str,
        title: str,
        description: str | None = None,
        *,
        fallback: bool = False,
    ) -> None:
        """A live advisory: a ``notice`` where the client advertised notices (never
        recorded, never replayed); otherwise, with ``fallback``, an ordinary agent message
        (conversation content, recorded like any other)."""
        if self.shows_notices:
            await session.emit_fn(  # not recorded; a hidden subagent's goes nowhere
                session.id,
                t.Notice(severity=severity, title=title, description=description or UNSET),
            )
        elif fallback:
            await session.say(f"**{title}**" + (f": {description}" if description else ""))

    # ------------------------------------------------------------------ background work

    def background(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_log_failure)

    def warm_up(self, session: Session | None = None) -> None:
        """Start the process edge's warm-up (once), never during ``initialize`` or
        ``session/new``: the imports in a thread, then the configured model's provider
        readied (:meth:`prepare_model`). Turns wait for it (:meth:`warmed`), without
        blocking the event loop, rather than import on it. With ``session`` (just opened,
        its response sent), that session's first turn is readied too
        (:meth:`_prepare_session`)."""
        if self._warming is None and self._warm is not None:
            self._warming = asyncio.ensure_future(self._warm_up(self._warm))
        if session is not None:
            self.opened.set()
            self.background(self._prepare_session(session))

    async def _warm_up(self, warm: Callable[[], None]) -> None:
        loop = asyncio.get_running_loop()
        try:
            start = loop.time()
            await loop.run_in_executor(None, self._ready_store)
            await loop.run_in_executor(None, warm)
            imported = loop.time()
            await self.prepare_model(self.config.model)
            log.debug("warmed up", imports=round(imported - start, 3),
                      prepare=round(loop.time() - imported, 3))  # fmt: skip
        except Exception as exc:  # warming only saves time: the first turn does it anyway
            log.warning("warm-up failed", error=repr(exc))

    async def prepare_model(self, model: str) -> None:
        """Ready ``model``'s provider for its first request (the SDK client; a rehearsal
        of a request unless a turn is already waiting), once, in a worker thread."""
        if model in self._prepared:
            return
        self._prepared.add(model)
        provider = self.provider_for(model)
        if isinstance(provider, Prepares):
            rehearse = not self._waiting  # a waiting turn would pay for it: skip it
            await asyncio.get_running_loop().run_in_executor(None, provider.prepare, rehearse)

    async def _prepare_session(self, session: Session) -> None:
        """What the session's first turn would otherwise do first: its model's provider
        (a loaded session may use another model; no SDK but its model's is imported),
        its system prompt (the environment read, git asked: tens of ms in a large
        repository), its project's permission rules and the tools; and, unless the
        family's ``connect-ahead`` is off, the connection to the model's server opened
        (a compatible server is asked its limits on the way)."""
        from ..engine.instructions import system_prompt

        await self.warmed(turn=False)
        if self.sessions.get(session.id) is not session:
            return  # closed meanwhile
        await self.prepare_model(session.model)
        provider = self.provider_for(session.model)
        family = session.model.partition(":")[0]
        settings = self.config.provider_settings(family)
        if isinstance(provider, Connects) and settings.connect_ahead and not session.busy:
            self.background(provider.connect())  # (a turn under way makes its own)
        if session.system_text is None:
            text = await system_prompt(session, configured=self.config.system_prompt)
            self._prebuilt[session] = (text, session.mode, session.model)
        await self.rules_for(session)
        self.tools_for(session)
        self.child_env  # noqa: B018 (built once: every family's secret names)
        log.debug("session prepared", session_id=session.id)

    async def warmed(self, turn: bool = True) -> None:
        """Wait for the warm-up, if it is under way (``turn``: a turn waits, so what only
        saves a later turn's time is skipped)."""
        warming = self._warming
        if warming is not None and not warming.done():
            self._waiting += turn
            try:
                await asyncio.shield(warming)
            finally:
                self._waiting -= turn

    # ------------------------------------------------------------------ the end

    def cancel_all(self) -> None:
        for session in self.sessions.values():
            session.cancel()

    async def shutdown(self) -> None:
        self.cancel_all()
        for session in self.sessions.values():
            session.close()  # flushed, synced, ownership released
        hubs = [s.mcp.aclose() for s in self.sessions.values() if s.mcp is not None]
        if hubs:  # MCP servers are child processes: never leave them behind
            await asyncio.wait_for(asyncio.gather(*hubs, return_exceptions=True), 6.0)
        for provider in [*self._providers.values(), *self._retired]:
            try:
                await asyncio.wait_for(provider.aclose(), 0.2)
            except Exception as exc:  # shutting down: a provider that fails to close is fine
                log.debug("provider close failed", error=repr(exc))
        if self._store is not None:  # every queued write reaches the disk before exit
            await asyncio.to_thread(self._store.writer.close)


def _seconds(delay: float) -> str:
    return f"{delay:.1f} s" if delay >= 1 else f"{delay * 1000:.0f} ms"


def _log_failure(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("background task failed", error=repr(task.exception()))
