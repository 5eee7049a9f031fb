"""The ACP agent: method handlers over sessions, the store, the turn engine and providers.

Capabilities advertised in ``initialize`` are exactly the methods routed here. Sessions
live in :attr:`Agent.sessions` while open in this process and in the :class:`Store` for
good: ``session/load``/``resume``/``fork`` bring a stored one back, ``close`` releases it,
``delete`` removes it from the disk.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from . import __version__, log
from .client import ClientProxy
from .config import Config, default_state_dir
from .errors import (
    AuthRequired,
    InternalError,
    InvalidParams,
    InvalidRequest,
    ProviderAuthError,
    ProviderError,
    SessionNotFound,
)
from .permissions import MODE_IDS, MODES, Rules
from .protocol import UNSET, UnsetType
from .protocol import types as t
from .providers.base import ModelProvider, UserMessage
from .providers.models import ModelInfo, model_info
from .rpc.connection import Route

if TYPE_CHECKING:
    # Loaded on first use (a session), not on the way to the `initialize` reply.
    from .records import Record
    from .replay import State
    from .session import Session
    from .store import Store
    from .subagents import Subagents
    from .tools import Toolset
    from .turn import TurnEngine

PROTOCOL_VERSION = 1
AUTH_METHOD_ID = "api-key"
THINKING = ("off", "low", "medium", "high")
OFFLINE_INFO = ModelInfo(
    context_window=128_000,
    max_output_tokens=8_192,
    input_price=0.0,
    output_price=0.0,
    supports_images=True,
)


class Agent:
    def __init__(self, config: Config, client: ClientProxy) -> None:
        self.config = config
        self.client = client
        self.sessions: dict[str, Session] = {}
        self._store: Store | None = None
        self._providers: dict[str, ModelProvider] = {}
        self._rules: dict[str, Rules] = {}
        self._preload: asyncio.Future[None] | None = None
        self._engine: TurnEngine | None = None
        self._tasks: set[asyncio.Future[Any]] = set()
        self._subagents: Subagents | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            from .store import Store

            self._store = Store(self.config.state_dir or default_state_dir())
        return self._store

    @property
    def subagents(self) -> Subagents:
        if self._subagents is None:
            from .subagents import Subagents

            self._subagents = Subagents(self.client, lambda: self.engine, self.sessions)
        return self._subagents

    def _guard(self, handler: Any) -> Any:
        """``handler``, refusing requests that name a subagent's session (those only take
        session/cancel). No subagent exists before the first spawn: nothing to check."""

        async def checked(p: Any) -> Any:
            if self._subagents is not None:
                return await self._subagents.guard(handler)(p)
            return await handler(p)

        return checked

    @property
    def engine(self) -> TurnEngine:
        """The turn engine, built on first use (its imports stay off the start-up path)."""
        if self._engine is None:
            from .tools import builtin_tools
            from .turn import TurnEngine, TurnLimits

            limits = self.config.limits
            self._builtin_tools = builtin_tools(self.subagents.tool)
            self._engine = TurnEngine(
                client=self.client,
                tools_for=self.tools_for,
                provider_for=self.provider_for,
                model_info_for=self.model_info_for,
                rules_for=self._rules_for,
                limits=TurnLimits(
                    max_turn_requests=limits.max_turn_requests,
                    max_retries=limits.max_retries,
                    retry_max_delay=limits.retry_max_delay,
                    idle_timeout=limits.request_timeout,
                ),
                system_prompt=self.config.system_prompt,
                notify=lambda s, sev, title, desc: self.notify(s, sev, title, desc),
                before_request=self._maybe_compact,
            )
        return self._engine

    def _rules_for(self, session: Session) -> Rules:
        """The project's remembered "always" answers (shared by its sessions, persisted)."""
        rules = self._rules.get(session.cwd)
        if rules is None:
            state_dir = os.path.dirname(self.store.root)
            rules = self._rules[session.cwd] = Rules.for_project(state_dir, session.cwd)
        return rules

    def tools_for(self, session: Session) -> Toolset:
        """The built-in tools and the session's MCP tools."""
        if session.mcp is None:
            return self._builtin_tools
        from .tools import Toolset

        return Toolset([*self._builtin_tools.tools(), *session.mcp.tools()])

    # ------------------------------------------------------------------ routing

    def routes(self) -> dict[str, Route[Any]]:
        guard = self._guard
        return {
            "initialize": Route(t.InitializeRequest, self.initialize),
            "authenticate": Route(t.AuthenticateRequest, self.authenticate),
            "session/new": Route(t.NewSessionRequest, self.new_session),
            "session/load": Route(t.LoadSessionRequest, guard(self.load_session)),
            "session/resume": Route(t.ResumeSessionRequest, guard(self.resume_session)),
            "session/fork": Route(t.ForkSessionRequest, guard(self.fork_session)),
            # every param is optional: so is the params object
            "session/list": Route(_OPTIONAL_LIST_PARAMS, self.list_sessions),
            "session/delete": Route(t.DeleteSessionRequest, guard(self.delete_session)),
            "session/prompt": Route(
                t.PromptRequest, guard(self.prompt), on_cancel=self._cancel_prompt
            ),
            "session/cancel": Route(t.CancelNotification, self.cancel, notification=True),
            "session/set_mode": Route(t.SetSessionModeRequest, guard(self.set_mode)),
            "session/set_config_option": Route(
                t.SetSessionConfigOptionRequestAny, guard(self.set_config_option)
            ),
            "session/close": Route(t.CloseSessionRequest, guard(self.close_session)),
        }

    # ------------------------------------------------------------------ models

    @property
    def models(self) -> list[str]:
        seen = [self.config.model]
        for m in self.config.models:
            if m not in seen:
                seen.append(m)
        return seen

    def provider_for(self, model: str) -> ModelProvider:
        provider = self._providers.get(model)
        if provider is None:
            from .providers import make_provider

            cfg = self.config if model == self.config.model else _with_model(self.config, model)
            provider = self._providers[model] = make_provider(cfg)
        return provider

    def model_info_for(self, model: str) -> ModelInfo:
        kind, _, name = model.partition(":")
        info = OFFLINE_INFO if kind == "offline" else model_info(kind, name)
        override = self.config.model_overrides.get(model) or self.config.model_overrides.get(name)
        if override is not None:
            import msgspec

            changes = {k: v for k, v in msgspec.structs.asdict(override).items() if v is not None}
            info = msgspec.structs.replace(info, **changes)
        return info

    # ------------------------------------------------------------------ handlers

    async def initialize(self, p: t.InitializeRequest) -> t.InitializeResponse:
        if p.client_capabilities is not UNSET:
            self.client.capabilities = p.client_capabilities
        info = self.model_info_for(self.config.model)
        return t.InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=t.AgentCapabilities(
                load_session=True,
                prompt_capabilities=t.PromptCapabilities(
                    image=info.supports_images, audio=False, embedded_context=True
                ),
                mcp_capabilities=t.McpCapabilities(http=True, sse=True),
                session_capabilities=t.SessionCapabilities(
                    list=t.SessionListCapabilities(),
                    delete=t.SessionDeleteCapabilities(),
                    additional_directories=t.SessionAdditionalDirectoriesCapabilities(),
                    fork=t.SessionForkCapabilities(),
                    resume=t.SessionResumeCapabilities(),
                    close=t.SessionCloseCapabilities(),
                ),
            ),
            auth_methods=[self._auth_method()],
            agent_info=t.Implementation(name="acp-agent", title="acp-agent", version=__version__),
        )

    # ------------------------------------------------------------------ authentication

    def _auth_method(self) -> t.AuthMethodAgent:
        """One agent-type method: it tells the client which key the configured model needs."""
        from .providers import missing_key

        needed = missing_key(self.config)
        if self.config.provider == "offline":
            description = "No key needed: the offline built-in model runs locally."
        else:
            name = (
                needed
                or (
                    self.config.openai
                    if self.config.provider == "openai"
                    else self.config.anthropic
                ).api_key_env
                or "the provider's key"
            )
            description = (
                f"{self.config.model} needs {name} in the agent's environment "
                "(or a base URL for a local OpenAI-compatible server)."
            )
        return t.AuthMethodAgent(id=AUTH_METHOD_ID, name="API key", description=description)

    def _require_key(self) -> None:
        from .providers import missing_key

        needed = missing_key(self.config)
        if needed is not None:
            raise AuthRequired(
                f"Authentication required: set {needed} for {self.config.model}",
                {"authMethods": [AUTH_METHOD_ID], "missing": needed},
            )

    async def authenticate(self, p: t.AuthenticateRequest) -> t.AuthenticateResponse:
        if p.method_id != AUTH_METHOD_ID:
            raise InvalidParams(
                f"Invalid params: unknown auth method {p.method_id!r} - at `$.methodId`"
            )
        self._require_key()
        return t.AuthenticateResponse()

    async def new_session(self, p: t.NewSessionRequest) -> t.NewSessionResponse:
        from .session import Session, new_session_id

        self._require_key()
        cwd, directories = _roots(p.cwd, p.additional_directories)
        session = Session(
            id=new_session_id(),
            cwd=cwd,
            emit_fn=self.client.session_update,
            mode=self.config.default_mode,
            model=self.config.model,
            thinking=self.config.thinking,
            additional_directories=directories,
        )
        self._store_new(session)
        self.sessions[session.id] = session
        self._attach(session, p.mcp_servers)
        asyncio.get_running_loop().call_soon(self._announce, session)
        return t.NewSessionResponse(
            session_id=session.id,
            modes=self._modes(session),
            config_options=self._config_options(session),
        )

    def _store_new(self, session: Session, body: Sequence[Record] = (), **header: Any) -> None:
        from .records import Header, now_iso

        """Create the session's log: a header, ``body`` (a fork's copy) and the settings."""
        head = Header(
            id=session.id,
            cwd=session.cwd,
            additional_directories=list(session.additional_directories),
            created_at=now_iso(),
            **header,
        )
        records: list[Record] = [*body, session.settings_record()]
        try:
            session.log = self.store.create(head, records)
            session.stored_roots = (head.cwd, head.additional_directories)
        except OSError as exc:
            log.warning("cannot store the session; it lives in memory only", error=str(exc))

    async def load_session(self, p: t.LoadSessionRequest) -> t.LoadSessionResponse:
        from .replay import draft_allowed, transcript

        self._require_key()
        cwd, directories = _roots(p.cwd, p.additional_directories)
        session, records = self._open(p.session_id, cwd, directories, read=True)
        self._attach(session, p.mcp_servers)
        caps = self.client.capabilities
        updates = transcript(records, lambda u: draft_allowed(u, caps), live=session.read_only)
        await session.replay(updates)  # the whole history, then the response
        asyncio.get_running_loop().call_soon(self._announce, session)
        return t.LoadSessionResponse(
            modes=self._modes(session), config_options=self._config_options(session)
        )

    async def resume_session(self, p: t.ResumeSessionRequest) -> t.ResumeSessionResponse:
        self._require_key()
        cwd, directories = _roots(p.cwd, p.additional_directories)
        session, _ = self._open(p.session_id, cwd, directories, read=False)
        self._attach(session, p.mcp_servers)
        asyncio.get_running_loop().call_soon(self._announce, session)
        return t.ResumeSessionResponse(
            modes=self._modes(session), config_options=self._config_options(session)
        )

    def _open(
        self, session_id: str, cwd: str, directories: list[str], *, read: bool
    ) -> tuple[Session, list[Record]]:
        """The session, in memory (brought back from the store if need be), with the
        given roots; and, if ``read``, its log's records."""
        from .replay import restore

        session = self.sessions.get(session_id)
        if session is not None and not session.read_only:
            if session.busy:
                raise InvalidRequest(f"Invalid request: session {session_id} has a running turn")
            session.cwd, session.additional_directories = cwd, directories
            session.flush()
            try:
                records = self.store.read(session_id) if read and session.log else []
            except OSError:
                records = []
            return session, records
        try:
            writer, records = self.store.open(session_id)
        except FileNotFoundError:
            raise SessionNotFound(session_id) from None
        except OSError as exc:
            log.error("cannot read a stored session", session_id=session_id, error=str(exc))
            raise InternalError(f"Cannot read session {session_id}: {exc.strerror}") from None
        state = restore(records)
        session = self._restored(session_id, state, cwd, directories)
        session.log, session.read_only = writer, writer is None
        self.sessions[session_id] = session
        return session, records

    def _restored(self, session_id: str, state: State, cwd: str, directories: list[str]) -> Session:
        """A session brought back from a log's state (for load, resume and fork). A mode
        or model this configuration no longer offers falls back, with a notice."""
        from .session import Session

        session = Session(
            id=session_id,
            cwd=cwd,
            emit_fn=self.client.session_update,
            mode=self._valid_mode(state),
            model=self._valid_model(state),
            thinking=state.thinking or self.config.thinking,
            additional_directories=directories,
        )
        session.restore(state)
        if state.model and state.model != session.model:
            session.pending_notices.append(
                (
                    "warning",
                    "Model not available",
                    f"{state.model} is not configured here;"
                    f" the session continues on {session.model}.",
                )
            )
        return session

    def _valid_mode(self, state: State) -> str:
        return state.mode if state.mode in MODE_IDS else self.config.default_mode

    def _valid_model(self, state: State) -> str:
        return state.model if state.model in self.models else self.config.model

    def _take_over(self, session: Session) -> None:
        """Prompting a session loaded read-only: own it now if its owner let it go."""
        from .replay import restore

        try:
            writer, records = self.store.open(session.id)
        except OSError:
            writer, records = None, []
        if writer is None:
            raise InvalidRequest(
                f"Invalid request: session {session.id} is open in another acp-agent process;"
                " it is read-only here until that process closes it",
                {"sessionId": session.id},
            )
        session.restore(restore(records))  # it may have gone on over there
        session.log, session.read_only = writer, False
        session.set_mode(session.mode)  # keep what this client chose meanwhile

    async def fork_session(self, p: t.ForkSessionRequest) -> t.ForkSessionResponse:
        from .records import Header, Roots
        from .replay import restore
        from .session import new_session_id

        self._require_key()
        cwd, directories = _roots(p.cwd, p.additional_directories)
        source = self.sessions.get(p.session_id)
        if source is not None:
            source.flush()
        try:
            records = self.store.read(p.session_id)
        except FileNotFoundError:
            raise SessionNotFound(p.session_id) from None
        except OSError as exc:
            raise InternalError(f"Cannot read session {p.session_id}: {exc.strerror}") from None
        body = [r for r in records if not isinstance(r, Header | Roots)]
        state = restore(body)
        session = self._restored(new_session_id(), state, cwd, directories)
        self._store_new(session, body, forked_from=p.session_id)
        self.sessions[session.id] = session
        self._attach(session, p.mcp_servers)
        asyncio.get_running_loop().call_soon(self._announce, session)
        return t.ForkSessionResponse(
            session_id=session.id,
            modes=self._modes(session),
            config_options=self._config_options(session),
        )

    async def list_sessions(self, p: t.ListSessionsRequest | None) -> t.ListSessionsResponse:
        p = p or t.ListSessionsRequest()
        cwd = p.cwd if isinstance(p.cwd, str) else None
        if cwd is not None and not os.path.isabs(cwd):
            raise InvalidParams(f"Invalid params: `cwd` must be an absolute path, got {cwd!r}")
        if p.archived not in (UNSET, None, "exclude", "include", "only"):
            raise InvalidParams(f"Invalid params: unknown archive filter {p.archived!r}")
        if p.archived == "only":  # nothing is ever archived
            return t.ListSessionsResponse(sessions=[])
        cursor = p.cursor if isinstance(p.cursor, str) else None
        try:
            metas, next_cursor = self.store.page(cwd and os.path.normpath(cwd), cursor)
        except ValueError:
            raise InvalidParams("Invalid params: unknown cursor - at `$.cursor`") from None
        return t.ListSessionsResponse(
            sessions=[
                t.SessionInfo(
                    session_id=m.id,
                    cwd=m.cwd,
                    additional_directories=m.additional_directories or UNSET,
                    title=m.title or UNSET,
                    updated_at=m.updated_at,
                )
                for m in metas
            ],
            next_cursor=next_cursor or UNSET,
        )

    async def delete_session(self, p: t.DeleteSessionRequest) -> t.DeleteSessionResponse:
        session = self.sessions.get(p.session_id)
        if session is not None:
            await self._release(session)
        self.store.delete(p.session_id)  # unknown ids are fine (idempotent)
        return t.DeleteSessionResponse()

    def _attach(self, session: Session, servers: Sequence[t.McpServerAny] | UnsetType) -> None:
        """Give an opened session its slash commands and (in the background) its MCP
        servers; ``servers`` is the complete list for this connection."""
        from .commands import load_prompt_commands

        session.prompt_commands = load_prompt_commands(session.cwd)
        if session.mcp is not None:  # load/resume again: the client's list replaces it
            self._background(session.mcp.aclose())
            session.mcp = None
        if servers:
            from .mcp import McpHub

            async def problem(severity: str, title: str, description: str | None) -> None:
                await self.notify(session, severity, title, description, fallback=True)

            async def changed() -> None:
                await self._send_commands(session)

            session.mcp = McpHub(
                list(servers), cwd=session.cwd, on_problem=problem, on_change=changed
            )
            session.mcp.start()

    def _announce(self, session: Session) -> None:
        """After the session/new (load, resume, fork) response: commands and usage; and,
        the first time, warm the turn engine and the provider's SDK in a thread."""
        self._background(self._announce_now(session))
        if self._preload is None:
            # Not during initialize or session/new: a thread importing an SDK holds the
            # GIL for stretches and would delay those replies. A prompt comes later.
            from .providers import preload

            self._preload = asyncio.get_running_loop().run_in_executor(None, preload, self.config)

    async def _announce_now(self, session: Session) -> None:
        from .turn import usage_update

        await self._send_commands(session)
        while session.pending_notices:
            severity, title, description = session.pending_notices.pop(0)
            await self.notify(session, severity, title, description, fallback=True)
        await session.emit(usage_update(session, self.model_info_for(session.model)))

    async def _send_commands(self, session: Session) -> None:
        from .commands import available_commands

        if self.sessions.get(session.id) is not session:
            return  # closed meanwhile
        extra = (
            [(c.name, c.description, c.hint) for c in session.mcp.prompts()] if session.mcp else []
        )
        await self.client.session_update(
            session.id,
            t.AvailableCommandsUpdate(
                available_commands=available_commands(session.prompt_commands, extra)
            ),
        )

    def _background(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_log_failure)

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
        caps = self.client.capabilities.session
        if isinstance(caps, t.ClientSessionCapabilities) and isinstance(
            caps.notices, t.NoticeCapabilities
        ):
            await session.emit_fn(  # not recorded; a hidden subagent's goes nowhere
                session.id,
                t.Notice(severity=severity, title=title, description=description or UNSET),
            )
        elif fallback:
            text = f"**{title}**" + (f": {description}" if description else "") + "\n"
            await session.emit(
                t.AgentMessageChunk(
                    content=t.TextContent(text=text), message_id=session.new_message_id()
                )
            )

    def session(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise SessionNotFound(session_id)
        return session

    async def prompt(self, p: t.PromptRequest) -> t.PromptResponse:
        session = self.session(p.session_id)
        info = self.model_info_for(session.model)
        self._check_prompt(p.prompt, images=info.supports_images)
        if session.read_only:
            self._take_over(session)
        turn = session.begin_turn()
        try:
            async with session.lock:
                if turn.cancel_requested:
                    return t.PromptResponse(stop_reason="cancelled")
                with log.bound(session_id=session.id):
                    return await self._run_turn(session, p.prompt, info)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if turn.cancel_requested and task is not None:
                task.uncancel()
                return t.PromptResponse(stop_reason="cancelled")
            raise
        except ProviderAuthError as exc:
            raise AuthRequired(f"Authentication required: {exc.message}") from None
        except ProviderError as exc:
            log.warning("model request failed", error=exc.message)
            raise InternalError(f"Model request failed: {exc.message}") from None
        finally:
            session.end_turn(turn)

    async def _run_turn(
        self, session: Session, blocks: list[t.ContentBlock], info: ModelInfo
    ) -> t.PromptResponse:
        from .replay import prompt_text
        from .session import make_title
        from .turn import user_parts

        session.record_prompt(blocks, prompt_text(blocks))
        stop = "error"
        try:
            command = await self._slash(session, blocks)
            if isinstance(command, t.PromptResponse):
                stop = command.stop_reason
                return command
            blocks = command
            if session.mcp is not None:
                await session.mcp.wait_ready(self.config.limits.mcp_start_timeout)
            user = UserMessage(user_parts(blocks, images=info.supports_images))
            stop, usage = await self.engine.run(session, user)
            if stop == "end_turn" and session.title is None and session.first_prompt:
                await session.set_title(make_title(session.first_prompt))
            return t.PromptResponse(stop_reason=stop, usage=usage)  # type: ignore[arg-type]
        except asyncio.CancelledError:
            stop = "cancelled"
            raise
        finally:
            session.record_turn_end(stop)

    # ------------------------------------------------------------------ slash commands

    async def _slash(
        self, session: Session, blocks: list[t.ContentBlock]
    ) -> t.PromptResponse | list[t.ContentBlock]:
        """Handle a leading ``/command``: a built-in answers by itself (a response) or
        changes what the model sees; a prompt command expands. Other prompts pass as is."""
        from .commands import parse_invocation

        first = blocks[0] if blocks else None
        invocation = (
            parse_invocation(first.text.strip()) if isinstance(first, t.TextContent) else None
        )
        if invocation is None:
            return blocks
        name, rest = invocation
        tail = blocks[1:]
        done = t.PromptResponse(stop_reason="end_turn")
        if name == "help":
            await self._say(session, self._help(session))
            return done
        if name in ("mode", "plan"):
            target = "plan" if name == "plan" else rest
            if target:
                if target not in MODE_IDS:
                    await self._say(
                        session, f"Unknown mode `{target}`: one of {', '.join(MODE_IDS)}."
                    )
                    return done
                await self._switch_mode(session, target)
            if name == "plan" and rest:
                return [t.TextContent(text=f"Plan this task (plan mode: read-only): {rest}"), *tail]
            await self._say(session, f"Mode: **{session.mode}**.")
            return done
        if name == "model":
            if rest:
                if rest not in self.models:
                    await self._say(
                        session, f"Unknown model `{rest}`: one of {', '.join(self.models)}."
                    )
                    return done
                session.set_model(rest)
                await session.emit(
                    t.ConfigOptionUpdate(config_options=self._config_options(session))
                )
            await self._say(
                session, f"Model: **{session.model}** (available: {', '.join(self.models)})."
            )
            return done
        if name == "compact":
            await self._compact(session, rest or None, keep_user_turns=0)
            return done
        command = session.prompt_commands.get(name)
        if command is not None:
            return [t.TextContent(text=command.expand(rest)), *tail]
        if session.mcp is not None and any(p.name == name for p in session.mcp.prompts()):
            from .mcp import PromptError

            try:
                return [*await session.mcp.get_prompt(name, rest), *tail]
            except PromptError as exc:
                await self._say(session, f"`/{name}` failed: {exc}")
                return done
        return blocks  # not ours: the model reads it as text

    def _help(self, session: Session) -> str:
        from .commands import available_commands

        extra = (
            [(c.name, c.description, c.hint) for c in session.mcp.prompts()] if session.mcp else []
        )
        lines = [
            f"- `/{c.name}` — {c.description}"
            for c in available_commands(session.prompt_commands, extra)
        ]
        return "Commands:\n" + "\n".join(lines)

    async def _say(self, session: Session, text: str) -> None:
        await session.emit(
            t.AgentMessageChunk(
                content=t.TextContent(text=text + "\n"), message_id=session.new_message_id()
            )
        )

    async def _switch_mode(self, session: Session, mode: str) -> None:
        """An agent-initiated mode change: both the mode and the config option follow."""
        session.set_mode(mode)
        await session.emit(t.CurrentModeUpdate(current_mode_id=mode))
        await session.emit(t.ConfigOptionUpdate(config_options=self._config_options(session)))

    # ------------------------------------------------------------------ compaction

    async def _maybe_compact(self, session: Session) -> None:
        """Before a model request: compact when the context passes the configured share."""
        info = self.model_info_for(session.model)
        threshold = self.config.limits.compact_at * info.context_window
        if session.usage.context_tokens < threshold:
            return
        share = session.usage.context_tokens / info.context_window
        await self.notify(
            session,
            "info",
            "Compacting the conversation",
            f"The context is {share:.0%} full; older messages are summarised.",
        )
        await self._compact(session, None, keep_user_turns=1)

    async def _compact(
        self, session: Session, instructions: str | None, *, keep_user_turns: int
    ) -> str:
        from .compaction import compact
        from .providers.offline import estimate_tokens
        from .turn import usage_update

        caps = self.client.capabilities.session
        reported = isinstance(caps, t.ClientSessionCapabilities) and isinstance(
            caps.compaction, t.CompactionCapabilities
        )
        info = self.model_info_for(session.model)
        status = await compact(
            session,
            self.provider_for(session.model),
            reported=reported,
            instructions=instructions,
            keep_user_turns=keep_user_turns,
            max_tokens=min(info.max_output_tokens, 8192),
        )
        if status == "skipped" and keep_user_turns == 0:
            await self._say(session, "Nothing to compact yet.")
        if status == "completed":
            session.usage.context_tokens = estimate_tokens(session.history, "")
            await session.emit(usage_update(session, info))
        return status

    def _check_prompt(self, blocks: list[t.ContentBlock], *, images: bool) -> None:
        for i, block in enumerate(blocks):
            if isinstance(block, t.AudioContent):
                raise InvalidParams(
                    f"Invalid params: audio prompts are not supported - at `$.prompt[{i}]`"
                )
            if isinstance(block, t.ImageContent) and not images:
                raise InvalidParams(
                    f"Invalid params: the model does not accept images - at `$.prompt[{i}]`"
                )

    def _cancel_prompt(self, p: t.PromptRequest) -> None:
        session = self.sessions.get(p.session_id)
        if session is not None:
            session.cancel()

    async def cancel(self, p: t.CancelNotification) -> None:
        session = self.sessions.get(p.session_id)
        if session is not None:  # unknown or idle sessions: nothing to do
            session.cancel()
        else:
            self.subagents.cancel(p.session_id)  # a child: it and its descendants only

    async def close_session(self, p: t.CloseSessionRequest) -> t.CloseSessionResponse:
        await self._release(self.session(p.session_id))
        return t.CloseSessionResponse()

    async def _release(self, session: Session) -> None:
        """Cancel the session's turns, let them answer, then free it (and its log)."""
        session.cancel()
        tasks = [turn.task for turn in session.turns if turn.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=5.0)
        self.sessions.pop(session.id, None)
        session.close()
        if session.mcp is not None:
            await session.mcp.aclose()
            session.mcp = None

    # ------------------------------------------------------------------ modes & options

    def _modes(self, session: Session) -> t.SessionModeState:
        return t.SessionModeState(
            current_mode_id=session.mode,
            available_modes=[t.SessionMode(id=i, name=n, description=d) for i, n, d in MODES],
        )

    def _config_options(self, session: Session) -> list[t.SessionConfigOption]:
        return [
            t.SessionConfigSelect(
                id="mode",
                name="Mode",
                category="mode",
                current_value=session.mode,
                options=[
                    t.SessionConfigSelectOptionsItemAny(value=i, name=n, description=d)
                    for i, n, d in MODES
                ],
            ),
            t.SessionConfigSelect(
                id="model",
                name="Model",
                category="model",
                current_value=session.model,
                options=[t.SessionConfigSelectOptionsItemAny(value=m, name=m) for m in self.models],
            ),
            *(
                [
                    t.SessionConfigSelect(
                        id="thought_level",
                        name="Thinking",
                        category="thought_level",
                        current_value=session.thinking,
                        options=[
                            t.SessionConfigSelectOptionsItemAny(value=v, name=v.capitalize())
                            for v in THINKING
                        ],
                    )
                ]
                if self.model_info_for(session.model).supports_thinking
                else []
            ),
        ]

    async def set_mode(self, p: t.SetSessionModeRequest) -> t.SetSessionModeResponse:
        session = self.session(p.session_id)
        if p.mode_id not in MODE_IDS:
            raise InvalidParams(f"Invalid params: unknown mode {p.mode_id!r} - at `$.modeId`")
        session.set_mode(p.mode_id)
        await session.emit(t.ConfigOptionUpdate(config_options=self._config_options(session)))
        return t.SetSessionModeResponse()

    async def set_config_option(
        self, p: t.SetSessionConfigOptionRequestAny
    ) -> t.SetSessionConfigOptionResponse:
        session = self.session(p.session_id)
        allowed: Mapping[str, list[str]] = {"mode": MODE_IDS, "model": self.models}
        if self.model_info_for(session.model).supports_thinking:
            allowed = {**allowed, "thought_level": list(THINKING)}
        if p.config_id not in allowed:
            raise InvalidParams(
                f"Invalid params: unknown config option {p.config_id!r} - at `$.configId`"
            )
        if not isinstance(p.value, str) or p.value not in allowed[p.config_id]:
            raise InvalidParams(
                f"Invalid params: {p.value!r} is not a value of {p.config_id!r} - at `$.value`"
            )
        if p.config_id == "mode":
            session.set_mode(p.value)
            await session.emit(t.CurrentModeUpdate(current_mode_id=p.value))
        elif p.config_id == "thought_level":
            session.set_thinking(p.value)
        else:
            session.set_model(p.value)
        return t.SetSessionConfigOptionResponse(config_options=self._config_options(session))

    # ------------------------------------------------------------------ lifecycle

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
        for provider in self._providers.values():
            try:
                await asyncio.wait_for(provider.aclose(), 0.2)
            except Exception as exc:  # shutting down: a provider that fails to close is fine
                log.debug("provider close failed", error=repr(exc))


_OPTIONAL_LIST_PARAMS = cast("type[t.ListSessionsRequest | None]", t.ListSessionsRequest | None)


def _roots(cwd: str, directories: list[str] | UnsetType) -> tuple[str, list[str]]:
    """Validate a lifecycle request's roots (before anything is created or loaded)."""
    if not os.path.isabs(cwd):
        raise InvalidParams(f"Invalid params: `cwd` must be an absolute path, got {cwd!r}")
    extra = [] if isinstance(directories, UnsetType) else directories
    for i, path in enumerate(extra):
        if not path or not os.path.isabs(path):
            raise InvalidParams(
                f"Invalid params: additional directories must be absolute paths, got {path!r}"
                f" - at `$.additionalDirectories[{i}]`"
            )
    return os.path.normpath(cwd), [os.path.normpath(path) for path in extra]


def _log_failure(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("background task failed", error=repr(task.exception()))


def _with_model(config: Config, model: str) -> Config:
    import msgspec

    return msgspec.structs.replace(config, model=model)
