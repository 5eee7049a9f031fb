"""The ACP agent as the editor sees it: the method table and capability negotiation.

Each method is routed to the module that owns it: ``lifecycle`` (sessions), ``catalog``
(listing, titles, status, archiving), ``prompting`` (prompts and their cancellation),
``options`` (modes and config options), ``auth`` (authentication, ``logout``,
``auth/status``), ``endpoints`` (``providers/*``). The capabilities advertised by
``initialize`` are exactly the methods routed here. Requests naming a subagent's session
are refused (those sessions take ``session/cancel`` only; ``catalog``'s methods do not
know them).
Until ``initialize`` has been received, every other request is refused (-32600) and
notifications are ignored.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .. import __version__
from ..client import ClientProxy
from ..config import Config
from ..errors import InvalidRequest
from ..protocol import UNSET
from ..protocol import types as t
from ..rpc.connection import Route
from . import auth
from .runtime import Runtime

if TYPE_CHECKING:
    from . import catalog, endpoints, lifecycle, options, prompting

PROTOCOL_VERSION = 1
_HANDLERS = ("catalog", "endpoints", "lifecycle", "options", "prompting")


def _import_handlers() -> None:
    """The modules the routes call, bound by the first request that needs one (the
    warm-up, ``server.SESSION_MODULES``, has usually imported them by then), not on the
    way to ``initialize``: about 1.5 ms of a ~50 ms start."""
    import importlib

    names = globals()
    for name in _HANDLERS:
        names[name] = importlib.import_module(f"{__package__}.{name}")


P = TypeVar("P")
R = TypeVar("R")


Handler = Callable[[], Callable[[Runtime, P], Awaitable[R]]]
"""A route's handler, named when first called (its module is imported late)."""


def optional(params: type[P]) -> type[P | None]:
    """Params a client may leave out (every field of ``params`` is optional)."""
    return cast("type[P | None]", params | None)


class Agent:
    def __init__(
        self, config: Config, client: ClientProxy, warm: Callable[[], None] | None = None
    ) -> None:
        self.rt = Runtime(config, client, warm)
        self.initialized = False
        self.auth = auth.StatusFeed(self.rt)

    @property
    def config(self) -> Config:
        return self.rt.config

    def routes(self) -> dict[str, Route[Any]]:
        rt = self.rt

        def bound(handler: Handler[P, R]) -> Callable[[P], Awaitable[R]]:
            """The handler ``handler()`` names, once ``initialize`` is done."""

            async def call(p: P) -> R:
                self.require_initialized()
                if "prompting" not in globals():
                    _import_handlers()
                return await handler()(rt, p)

            return call

        def guarded(handler: Handler[P, R]) -> Callable[[P], Awaitable[R]]:
            """``handler``, refusing a subagent's session; no check before the first spawn."""
            call = bound(handler)

            async def checked(p: P) -> R:
                if rt.has_subagents:
                    return await rt.subagents.guard(call)(p)  # type: ignore[type-var]
                return await call(p)

            return checked

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
                optional(t.ListProvidersRequest), bound(lambda: endpoints.list_providers)
            ),
            "providers/set": Route(t.SetProviderRequest, telling(lambda: endpoints.set_provider)),
            "providers/disable": Route(
                t.DisableProviderRequest, telling(lambda: endpoints.disable_provider)
            ),
            "session/new": Route(t.NewSessionRequest, bound(lambda: lifecycle.new_session)),
            "session/load": Route(t.LoadSessionRequest, guarded(lambda: lifecycle.load_session)),
            "session/resume": Route(
                t.ResumeSessionRequest, guarded(lambda: lifecycle.resume_session)
            ),
            "session/fork": Route(t.ForkSessionRequest, guarded(lambda: lifecycle.fork_session)),
            "session/list": Route(
                optional(t.ListSessionsRequest), bound(lambda: catalog.list_sessions)
            ),
            "session/delete": Route(
                t.DeleteSessionRequest, guarded(lambda: lifecycle.delete_session)
            ),
            "session/close": Route(t.CloseSessionRequest, guarded(lambda: lifecycle.close_session)),
            # a subagent's session is unknown to these (-32002), not refused (-32602)
            "session/set_title": Route(t.SetSessionTitleRequest, bound(lambda: catalog.set_title)),
            "session/status": Route(t.SessionStatusRequest, bound(lambda: catalog.session_status)),
            "session/archive": Route(
                t.ArchiveSessionRequest, bound(lambda: catalog.archive_session)
            ),
            "session/unarchive": Route(
                t.UnarchiveSessionRequest, bound(lambda: catalog.unarchive_session)
            ),
            "session/prompt": Route(
                t.PromptRequest,
                guarded(lambda: prompting.prompt),
                on_cancel=lambda p, task: prompting.cancel_prompt(rt, p, task),
            ),
            "session/cancel": Route(t.CancelNotification, self.cancel, notification=True),
            "session/set_mode": Route(t.SetSessionModeRequest, guarded(lambda: options.set_mode)),
            "session/set_config_option": Route(
                t.SetSessionConfigOptionRequestAny, guarded(lambda: options.set_config_option)
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
            self.rt.client.capabilities = p.client_capabilities
        info = self.rt.model_info_for(self.config.model)
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
            auth_methods=auth.auth_methods(self.config, self.rt.client.capabilities),
            agent_info=t.Implementation(name="acp-agent", title="acp-agent", version=__version__),
        )

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
        if not self.initialized:
            return  # a notification: ignored, never answered
        session = self.rt.sessions.get(p.session_id)
        if session is not None:  # unknown or idle sessions: nothing to do
            session.cancel()
        elif self.rt.has_subagents:
            self.rt.subagents.cancel(p.session_id)  # a child: it and its descendants only

    async def mcp_message(self, p: t.MessageMcpNotification) -> None:
        """From an editor-provided MCP server (``"type": "acp"``), about one of our requests."""
        from ..mcp import deliver

        deliver(p)

    def cancel_all(self) -> None:
        self.rt.cancel_all()

    async def shutdown(self) -> None:
        await self.rt.shutdown()
