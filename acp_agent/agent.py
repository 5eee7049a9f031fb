"""The ACP agent: method handlers over sessions, the turn engine and the providers.

Capabilities advertised in ``initialize`` are exactly the methods routed here.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import __version__, log
from .client import ClientProxy
from .config import Config
from .errors import (
    AuthRequired,
    InternalError,
    InvalidParams,
    ProviderAuthError,
    ProviderError,
    SessionNotFound,
)
from .permissions import MODE_IDS, MODES, Rules
from .protocol import UNSET
from .protocol import types as t
from .providers.base import ModelProvider, UserMessage
from .providers.models import ModelInfo, model_info
from .rpc.connection import Route
from .session import Session, new_session_id

if TYPE_CHECKING:
    from .turn import TurnEngine

PROTOCOL_VERSION = 1
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
        self._providers: dict[str, ModelProvider] = {}
        self._rules: dict[str, Rules] = {}
        self._preload: asyncio.Future[None] | None = None
        self._engine: TurnEngine | None = None

    @property
    def engine(self) -> TurnEngine:
        """The turn engine, built on first use (its imports stay off the start-up path)."""
        if self._engine is None:
            from .tools import builtin_tools
            from .turn import TurnEngine, TurnLimits

            limits = self.config.limits
            self._engine = TurnEngine(
                client=self.client,
                tools=builtin_tools(),
                provider_for=self.provider_for,
                model_info_for=self.model_info_for,
                rules_for=lambda s: self._rules.setdefault(s.id, Rules()),
                limits=TurnLimits(
                    max_turn_requests=limits.max_turn_requests,
                    max_retries=limits.max_retries,
                    retry_max_delay=limits.retry_max_delay,
                    idle_timeout=limits.request_timeout,
                ),
                system_prompt=self.config.system_prompt,
            )
        return self._engine

    # ------------------------------------------------------------------ routing

    def routes(self) -> dict[str, Route[Any]]:
        return {
            "initialize": Route(t.InitializeRequest, self.initialize),
            "session/new": Route(t.NewSessionRequest, self.new_session),
            "session/prompt": Route(t.PromptRequest, self.prompt, on_cancel=self._cancel_prompt),
            "session/cancel": Route(t.CancelNotification, self.cancel, notification=True),
            "session/set_mode": Route(t.SetSessionModeRequest, self.set_mode),
            "session/set_config_option": Route(
                t.SetSessionConfigOptionRequestAny, self.set_config_option
            ),
            "session/close": Route(t.CloseSessionRequest, self.close_session),
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
        if self._preload is None:
            # Warm the turn engine and the provider SDK in a thread, off the reply path.
            from .providers import preload

            self._preload = asyncio.get_running_loop().run_in_executor(None, preload, self.config)
        info = self.model_info_for(self.config.model)
        return t.InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=t.AgentCapabilities(
                load_session=False,
                prompt_capabilities=t.PromptCapabilities(
                    image=info.supports_images, audio=False, embedded_context=True
                ),
                mcp_capabilities=t.McpCapabilities(http=False, sse=False),
                session_capabilities=t.SessionCapabilities(close=t.SessionCloseCapabilities()),
            ),
            auth_methods=[],
            agent_info=t.Implementation(name="acp-agent", title="acp-agent", version=__version__),
        )

    async def new_session(self, p: t.NewSessionRequest) -> t.NewSessionResponse:
        if not os.path.isabs(p.cwd):
            raise InvalidParams(f"Invalid params: `cwd` must be an absolute path, got {p.cwd!r}")
        if p.mcp_servers:
            log.info("MCP servers are not connected yet", count=len(p.mcp_servers))
        session = Session(
            id=new_session_id(),
            cwd=os.path.normpath(p.cwd),
            emit_fn=self.client.session_update,
            mode=self.config.default_mode,
            model=self.config.model,
        )
        self.sessions[session.id] = session
        asyncio.get_running_loop().call_soon(self._announce, session)
        return t.NewSessionResponse(
            session_id=session.id,
            modes=self._modes(session),
            config_options=self._config_options(session),
        )

    def _announce(self, session: Session) -> None:
        """After the session/new response: the initial usage figures."""
        from .turn import usage_update

        info = self.model_info_for(session.model)
        task = asyncio.ensure_future(session.emit(usage_update(session, info)))
        task.add_done_callback(lambda f: f.exception() if not f.cancelled() else None)

    def session(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise SessionNotFound(session_id)
        return session

    async def prompt(self, p: t.PromptRequest) -> t.PromptResponse:
        session = self.session(p.session_id)
        info = self.model_info_for(session.model)
        self._check_prompt(p.prompt, images=info.supports_images)
        turn = session.begin_turn()
        try:
            async with session.lock:
                if turn.cancel_requested:
                    return t.PromptResponse(stop_reason="cancelled")
                from .turn import user_parts

                user = UserMessage(user_parts(p.prompt, images=info.supports_images))
                with log.bound(session_id=session.id):
                    stop, usage = await self.engine.run(session, user)
                return t.PromptResponse(stop_reason=stop, usage=usage)  # type: ignore[arg-type]
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

    async def close_session(self, p: t.CloseSessionRequest) -> t.CloseSessionResponse:
        session = self.session(p.session_id)
        session.cancel()
        # Wait for the running turns to answer `cancelled` before freeing the session.
        tasks = [turn.task for turn in session.turns if turn.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=5.0)
        self.sessions.pop(session.id, None)
        self._rules.pop(session.id, None)
        return t.CloseSessionResponse()

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
        ]

    async def set_mode(self, p: t.SetSessionModeRequest) -> t.SetSessionModeResponse:
        session = self.session(p.session_id)
        if p.mode_id not in MODE_IDS:
            raise InvalidParams(f"Invalid params: unknown mode {p.mode_id!r} - at `$.modeId`")
        session.mode = p.mode_id
        await session.emit(t.ConfigOptionUpdate(config_options=self._config_options(session)))
        return t.SetSessionModeResponse()

    async def set_config_option(
        self, p: t.SetSessionConfigOptionRequestAny
    ) -> t.SetSessionConfigOptionResponse:
        session = self.session(p.session_id)
        allowed: Mapping[str, list[str]] = {"mode": MODE_IDS, "model": self.models}
        if p.config_id not in allowed:
            raise InvalidParams(
                f"Invalid params: unknown config option {p.config_id!r} - at `$.configId`"
            )
        if not isinstance(p.value, str) or p.value not in allowed[p.config_id]:
            raise InvalidParams(
                f"Invalid params: {p.value!r} is not a value of {p.config_id!r} - at `$.value`"
            )
        if p.config_id == "mode":
            session.mode = p.value
            await session.emit(t.CurrentModeUpdate(current_mode_id=p.value))
        else:
            session.model = p.value
        return t.SetSessionConfigOptionResponse(config_options=self._config_options(session))

    # ------------------------------------------------------------------ lifecycle

    def cancel_all(self) -> None:
        for session in self.sessions.values():
            session.cancel()

    async def shutdown(self) -> None:
        self.cancel_all()
        for provider in self._providers.values():
            try:
                await asyncio.wait_for(provider.aclose(), 0.2)
            except Exception as exc:  # shutting down: a provider that fails to close is fine
                log.debug("provider close failed", error=repr(exc))


def _with_model(config: Config, model: str) -> Config:
    import msgspec

    return msgspec.structs.replace(config, model=model)
