"""The ACP agent as the editor sees it: the method table and capability negotiation.

Each method is routed to the module that owns it: ``lifecycle`` (sessions), ``prompting``
(prompts and their cancellation), ``options`` (modes and config options), ``auth``. The
capabilities advertised by ``initialize`` are exactly the methods routed here. Requests
naming a subagent's session are refused (those sessions take ``session/cancel`` only).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from . import __version__, auth, lifecycle, options, prompting
from .client import ClientProxy
from .config import Config
from .protocol import UNSET
from .protocol import types as t
from .rpc.connection import Route
from .runtime import Runtime

PROTOCOL_VERSION = 1

P = TypeVar("P")
R = TypeVar("R")


class Agent:
    def __init__(
        self, config: Config, client: ClientProxy, warm: Callable[[], None] | None = None
    ) -> None:
        self.rt = Runtime(config, client, warm)

    @property
    def config(self) -> Config:
        return self.rt.config

    def routes(self) -> dict[str, Route[Any]]:
        rt = self.rt

        def bound(handler: Callable[[Runtime, P], Awaitable[R]]) -> Callable[[P], Awaitable[R]]:
            async def call(p: P) -> R:
                return await handler(rt, p)

            return call

        def guarded(handler: Callable[[Runtime, P], Awaitable[R]]) -> Callable[[P], Awaitable[R]]:
            """``handler``, refusing a subagent's session; no check before the first spawn."""
            call = bound(handler)

            async def checked(p: P) -> R:
                if rt.has_subagents:
                    return await rt.subagents.guard(call)(p)  # type: ignore[type-var]
                return await call(p)

            return checked

        return {
            "initialize": Route(t.InitializeRequest, self.initialize),
            "authenticate": Route(t.AuthenticateRequest, self.authenticate),
            "session/new": Route(t.NewSessionRequest, bound(lifecycle.new_session)),
            "session/load": Route(t.LoadSessionRequest, guarded(lifecycle.load_session)),
            "session/resume": Route(t.ResumeSessionRequest, guarded(lifecycle.resume_session)),
            "session/fork": Route(t.ForkSessionRequest, guarded(lifecycle.fork_session)),
            "session/list": Route(lifecycle.OPTIONAL_LIST_PARAMS, bound(lifecycle.list_sessions)),
            "session/delete": Route(t.DeleteSessionRequest, guarded(lifecycle.delete_session)),
            "session/close": Route(t.CloseSessionRequest, guarded(lifecycle.close_session)),
            "session/prompt": Route(
                t.PromptRequest,
                guarded(prompting.prompt),
                on_cancel=lambda p, task: prompting.cancel_prompt(rt, p, task),
            ),
            "session/cancel": Route(t.CancelNotification, self.cancel, notification=True),
            "session/set_mode": Route(t.SetSessionModeRequest, guarded(options.set_mode)),
            "session/set_config_option": Route(
                t.SetSessionConfigOptionRequestAny, guarded(options.set_config_option)
            ),
            "mcp/message": Route(t.MessageMcpNotification, self.mcp_message, notification=True),
        }

    async def initialize(self, p: t.InitializeRequest) -> t.InitializeResponse:
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
                    system_prompt=t.SessionSystemPromptCapabilities(
                        mode=t.SessionSystemPromptModeCapabilities(
                            override=t.SessionSystemPromptOverrideCapabilities()
                        )
                    ),
                ),
            ),
            auth_methods=[auth.auth_method(self.config)],
            agent_info=t.Implementation(name="acp-agent", title="acp-agent", version=__version__),
        )

    async def authenticate(self, p: t.AuthenticateRequest) -> t.AuthenticateResponse:
        return auth.authenticate(self.config, p)

    async def cancel(self, p: t.CancelNotification) -> None:
        session = self.rt.sessions.get(p.session_id)
        if session is not None:  # unknown or idle sessions: nothing to do
            session.cancel()
        elif self.rt.has_subagents:
            self.rt.subagents.cancel(p.session_id)  # a child: it and its descendants only

    async def mcp_message(self, p: t.MessageMcpNotification) -> None:
        """From an editor-provided MCP server (``"type": "acp"``), about one of our requests."""
        from .mcp import deliver

        deliver(p)

    def cancel_all(self) -> None:
        self.rt.cancel_all()

    async def shutdown(self) -> None:
        await self.rt.shutdown()
