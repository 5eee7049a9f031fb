"""The ACP agent as the editor sees it: the method table and capability negotiation.

Each method is routed to the module that owns it: ``lifecycle`` (sessions), ``catalog``
(listing, titles, status, archiving), ``prompting`` (prompts and their cancellation),
``options`` (modes and config options), ``auth`` (authentication, ``logout``,
``auth/status``), ``endpoints`` (``providers/*``), ``steering`` (the ``_session/steering``
extension). The capabilities advertised by ``initialize`` are exactly the methods routed
here (the extension's in the result's top-level ``_meta``, where its clients read it).
Requests naming a subagent's session are refused (those sessions take ``session/cancel``
only; ``catalog``'s methods do not know them).
Until ``initialize`` has been received, every other request is refused (-32600) and
notifications are ignored.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .. import IMPORTING, __version__
from ..client import ClientProxy
from ..config import Config
from ..errors import InvalidRequest
from ..protocol import UNSET
from ..protocol import steering as steer_wire
from ..protocol import types as t
from ..providers.pool import Models
from ..rpc.connection import Route
from . import auth, opening
from .warmup import Warmup

if TYPE_CHECKING:
    from ..sessions.store import Store
    from . import services
    from .services import Services

PROTOCOL_VERSION = 1

P = TypeVar("P")
R = TypeVar("R")


Handler = Callable[[], Callable[["Services", P], Awaitable[R]]]
"""A route's handler, named when first called (its module is loaded late)."""


def optional(params: type[P]) -> type[P | None]:
    """Params a client may leave out (every field of ``params`` is optional)."""
    return cast("type[P | None]", params | None)


class Agent:
    def __init__(
        self,
        config: Config,
        client: ClientProxy,
        warm: Callable[[], None] | None = None,
        store: Store | None = None,
    ) -> None:
        self.client = client
        self.store = store
        """The store shared by the process's connections (``serve``); ``None``: its own."""
        self.models = Models(config)
        self.warmup = Warmup(warm, self._after_warm_imports)
        self.initialized = False
        self.auth = auth.StatusFeed(self.models, client)
        self._services: Services | None = None
        self._lock = threading.Lock()
        self.openings = opening.Openings()
        self.turn_deadlines: dict[asyncio.Timeout, float] = {}
        """The running turns' ``turn-timeout`` deadlines, with the loop time each turn
        started (``reload`` bounds them again)."""

    @property
    def config(self) -> Config:
        return self.models.config

    def services(self) -> Services:
        """Everything past ``initialize``: built by the warm-up thread or a request."""
        if self._services is None:
            with IMPORTING, self._lock:  # (one import at a time: acp_agent.IMPORTING)
                if self._services is None:
                    global services
                    from . import services  # the late-loaded boundary (see its docstring)

                    self._services = services.Services.build(
                        self.models, self.client, self.warmup, self.store, self.turn_deadlines
                    )
        return self._services

    async def settled(self) -> Services:  # once initialized, and no session being opened
        self.require_initialized()
        await self.openings.settled()
        return self.services()

    def has_open(self, session_id: str) -> bool:  # (on this connection; or being opened)
        sv = self._services
        return session_id in self.openings.ids or (sv is not None and session_id in sv.sessions)

    async def _after_warm_imports(self) -> None:
        """The warm-up's last step: the configured model's provider readied."""
        await self.models.prepare(self.config.model, rehearse=not self.warmup.waiting)

    def routes(self) -> dict[str, Route[Any]]:
        def bound(handler: Handler[P, R]) -> Callable[[P], Awaitable[R]]:
            """The handler ``handler()`` names, once ``initialize`` is done."""

            async def call(p: P) -> R:
                sv = await self.settled()  # (first: it loads what ``handler()`` names)
                return await handler()(sv, p)

            return call

        def guarded(handler: Handler[P, R]) -> Callable[[P], Awaitable[R]]:
            """``handler``, refusing a subagent's session."""
            call = bound(handler)

            async def checked(p: P) -> R:
                guard = (await self.settled()).sessions.guard
                return await guard(call)(p)  # type: ignore[type-var]

            return checked

        def turning(handler: Handler[P, R]) -> Callable[[P], Awaitable[R]]:
            """``handler`` (of the turn stage, loaded first off the event loop), refusing a
            subagent's session; a ``session/cancel`` while it waits cancels its turn."""
            call = guarded(handler)

            async def loaded(p: P) -> R:
                self.require_initialized()
                await self.openings.arrive(getattr(p, "session_id", ""), self.services)
                return await call(p)

            return loaded

        def telling(handler: Handler[P, R]) -> Callable[[P], Awaitable[R]]:
            """``handler``, then an ``auth/status_update`` if the state it leaves is news."""
            call = bound(handler)

            async def told(p: P) -> R:
                result = await call(p)
                await self.auth.refresh()
                return result

            return told

        return {
            "initialize": Route(t.InitializeRequest, self.initialize),
            "authenticate": Route(t.AuthenticateRequest, self.authenticate),
            "logout": Route(optional(t.LogoutRequest), telling(lambda: auth.logout)),
            "auth/status": Route(optional(t.AuthStatusRequest), self.auth_status),
            "providers/list": Route(
                optional(t.ListProvidersRequest), bound(lambda: services.endpoints.list_providers)
            ),
            "providers/set": Route(
                t.SetProviderRequest, telling(lambda: services.endpoints.set_provider)
            ),
            "providers/disable": Route(
                t.DisableProviderRequest, telling(lambda: services.endpoints.disable_provider)
            ),
            "session/new": Route(t.NewSessionRequest, self.new_session),
            "session/load": Route(
                t.LoadSessionRequest, guarded(lambda: services.lifecycle.load_session)
            ),
            "session/resume": Route(
                t.ResumeSessionRequest, guarded(lambda: services.lifecycle.resume_session)
            ),
            "session/fork": Route(
                t.ForkSessionRequest, guarded(lambda: services.lifecycle.fork_session)
            ),
            "session/list": Route(
                optional(t.ListSessionsRequest), bound(lambda: services.catalog.list_sessions)
            ),
            "session/delete": Route(
                t.DeleteSessionRequest, guarded(lambda: services.lifecycle.delete_session)
            ),
            "session/close": Route(
                t.CloseSessionRequest, guarded(lambda: services.lifecycle.close_session)
            ),
            # a subagent's session is unknown to these (-32002), not refused (-32602)
            "session/set_title": Route(
                t.SetSessionTitleRequest, bound(lambda: services.catalog.set_title)
            ),
            "session/status": Route(
                t.SessionStatusRequest, bound(lambda: services.catalog.session_status)
            ),
            "session/archive": Route(
                t.ArchiveSessionRequest, bound(lambda: services.catalog.archive_session)
            ),
            "session/unarchive": Route(
                t.UnarchiveSessionRequest, bound(lambda: services.catalog.unarchive_session)
            ),
            "session/prompt": Route(
                t.PromptRequest,
                turning(lambda: services.turnstage.prompting.prompt),
                on_cancel=lambda p, task: services.turnstage.prompting.cancel_prompt(
                    self.services(), p, task
                ),
            ),
            "session/cancel": Route(t.CancelNotification, self.cancel, notification=True),
            steer_wire.METHOD: Route(
                steer_wire.SteeringRequest, turning(lambda: services.turnstage.steering.steering)
            ),
            "session/set_mode": Route(
                t.SetSessionModeRequest, guarded(lambda: services.options.set_mode)
            ),
            "session/set_config_option": Route(
                t.SetSessionConfigOptionRequestAny,
                guarded(lambda: services.options.set_config_option),
            ),
            "mcp/message": Route(t.MessageMcpNotification, self.mcp_message, notification=True),
        }

    def require_initialized(self) -> None:
        """Requests before ``initialize`` are a client bug: refuse them, don't guess."""
        if not self.initialized:
            raise InvalidRequest(
                "Invalid request: the connection is not initialized; send initialize first"
            )

    async def initialize(self, p: t.InitializeRequest) -> t.InitializeResponse:
        self.initialized = True  # before any await: requests sent right after it pass
        if p.client_capabilities is not UNSET:
            self.client.capabilities = p.client_capabilities
        info = self.models.model_info_for(self.config.model)
        return t.InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=t.AgentCapabilities(
                load_session=True,
                prompt_capabilities=t.PromptCapabilities(
                    image=info.supports_images, audio=False, embedded_context=True
                ),
                mcp_capabilities=t.McpCapabilities(http=True, sse=True, acp=True),
                session_capabilities=t.SessionCapabilities(
                    list=t.SessionListCapabilities(),
                    delete=t.SessionDeleteCapabilities(),
                    additional_directories=t.SessionAdditionalDirectoriesCapabilities(),
                    fork=t.SessionForkCapabilities(),
                    resume=t.SessionResumeCapabilities(),
                    close=t.SessionCloseCapabilities(),
                    title=t.SessionTitleCapabilities(),
                    status=t.SessionStatusCapabilities(),
                    archive=t.SessionArchiveCapabilities(),
                    system_prompt=t.SessionSystemPromptCapabilities(
                        mode=t.SessionSystemPromptModeCapabilities(
                            override=t.SessionSystemPromptOverrideCapabilities()
                        )
                    ),
                ),
                auth=t.AgentAuthCapabilities(
                    logout=t.LogoutCapabilities(), status=t.AuthStatusCapabilities()
                ),
                providers=t.ProvidersCapabilities(),
            ),
            auth_methods=auth.auth_methods(self.config, self.client.capabilities),
            agent_info=t.Implementation(name="acp-agent", title="acp-agent", version=__version__),
            meta=steer_wire.ADVERTISED,
        )

    async def new_session(self, p: t.NewSessionRequest) -> t.NewSessionResponse:
        """Answered at once, the session opened after the answer (``handlers.opening``)."""
        self.require_initialized()
        response, new = await opening.answer(self.models, p)
        self.openings.open(new, self.services)
        return response

    async def authenticate(self, p: t.AuthenticateRequest) -> t.AuthenticateResponse:
        self.require_initialized()
        try:
            return auth.authenticate(self.config, p)
        finally:  # a login in a terminal may have stored a key since the client last asked
            await self.auth.refresh()

    async def auth_status(self, p: t.AuthStatusRequest | None) -> t.AuthStatusResponse:
        self.require_initialized()
        return self.auth.answer()

    async def cancel(self, p: t.CancelNotification) -> None:
        if self.initialized:  # (else ignored: a notification is never answered)
            self.openings.cancel(p.session_id)  # prompts waiting to run (see ``turning``)
            if self._services is not None:
                self._services.cancel(p.session_id)

    async def mcp_message(self, p: t.MessageMcpNotification) -> None:
        """From an editor-provided MCP server (``"type": "acp"``), about one of our requests."""
        if self._services is not None:  # no session, no server to answer
            services.lifecycle.deliver_mcp(p)

    def cancel_all(self) -> None:
        if self._services is not None:
            self._services.cancel_all()

    async def shutdown(self) -> None:
        await self.openings.settled()  # a session answered for is stored before the end
        if self._services is not None:
            await self._services.shutdown()
        else:
            await self.models.aclose()
