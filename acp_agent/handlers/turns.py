"""Each turn's world, built once before the turn starts and handed down to the engine
(:class:`~acp_agent.engine.world.TurnContext`), and a session's first turn readied ahead.

A turn's world is the session's provider behind the resilience policy (retries announced
to the user), its model's facts, the toolset (built-in and the session's MCP tools), the
project's remembered permission answers, the system prompt, the limits and the
environment of commands. Nothing below reaches back here: the engine, compaction and
subagents get what they need in the context (subagents build their children's through
:meth:`Turns.context`, given to them as a callable).
"""

from __future__ import annotations

import asyncio
import functools
import os
import weakref

import msgspec

from .. import log
from ..client import Client, ClientProxy, elicitation_modes
from ..engine.checkpoints import Store
from ..engine.childenv import child_environ
from ..engine.context import frame_tokens
from ..engine.instructions import system_prompt
from ..engine.notices import notify
from ..engine.permissions import Rules
from ..engine.projectfiles import Refused
from ..engine.skills import SkillTool, catalogue
from ..engine.subagents import Subagents
from ..engine.world import TurnContext, TurnLimits
from ..errors import ProviderError
from ..escaping import escaped
from ..providers.models import ModelInfo
from ..providers.pool import Models
from ..providers.resilient import Resilient
from ..sessions.registry import OpenSessions
from ..sessions.session import Session
from ..tools import Toolset, builtin_tools
from ..tools.ask import NAME as ASK_USER
from .background import Background
from .warmup import Warmup

SHOW_WAIT_AFTER = 2.0
"""Seconds: a retry wait this long is shown as an agent message to a client without notices."""


class Turns:
    def __init__(
        self,
        models: Models,
        client: ClientProxy,
        sessions: OpenSessions,
        warmup: Warmup,
        background: Background,
    ) -> None:
        self.models = models
        self.background = background
        self.client = client
        self.sessions = sessions
        self.warmup = warmup
        self.subagents = Subagents(client, self.context, sessions)
        self._rules: dict[str, Rules] = {}
        self._tools: Toolset | None = None
        self._prebuilt: weakref.WeakKeyDictionary[Session, tuple[str, str, str]] = (
            weakref.WeakKeyDictionary()
        )  # a session's system prompt built before its first turn, with its mode and model
        self._told_refused: set[tuple[str, str]] = set()  # (session id, file) told once
        state_dir = os.path.dirname(sessions.store.root)
        self.checkpoints = Store(state_dir, models.config.checkpoints, self.child_env)

    async def context(self, session: Session, client: Client | None = None) -> TurnContext:
        """Everything a turn of ``session`` needs (``client``: the editor as this
        session sees it; a subagent's view differs)."""
        await self.warmup.warmed()  # first: what follows may be the warm-up's, half done
        config = self.models.config
        await self.models.learn_limits(session.model)
        tools = self.tools_for(session)
        ahead = self._prebuilt.pop(session, None)
        if ahead and session.system_text is ahead[0] and (session.mode, session.model) != ahead[1:]:
            session.system_text = None  # changed since it was built ahead: build it now
        system = await self.system_prompt(session)
        session.frame_tokens = frame_tokens(system, tools.specs())
        limits = config.limits
        return TurnContext(
            session=session,
            client=client or self.client,
            provider=self.provider(session),
            model=self.facts(session),
            tools=tools,
            rules=await self.rules_for(session),
            system=system,
            limits=TurnLimits(
                max_turn_requests=limits.max_turn_requests,
                prompt_cache=limits.prompt_cache,
                prune_at=limits.prune_at,
                compact_at=limits.compact_at,
            ),
            env=self.child_env,
            checkpoint=self.checkpoints.recorder_of(session),
        )

    async def system_prompt(self, session: Session) -> str:
        """The session's system prompt (``instructions``; git run with the commands'
        environment); each instruction file that was not read is told to the user, once
        per session and file (a notice, else an agent message)."""

        async def refused(refusal: Refused) -> None:
            key = (session.id, refusal.path)
            if key not in self._told_refused:
                self._told_refused.add(key)
                await notify(self.client, session, "warning", "Instruction file skipped",
                             escaped(f"{refusal.path}: {refusal.reason}."),
                             fallback=True)  # fmt: skip

        built = session.system_text is None
        text = await system_prompt(
            session,
            configured=self.models.config.system_prompt,
            env=self.child_env,
            refused=refused,
        )
        _, dropped = catalogue(session.skills) if built else ("", [])
        key = (session.id, "\0skills\0" + ",".join(dropped))
        if dropped and session.parent is None and key not in self._told_refused:
            self._told_refused.add(key)
            await notify(self.client, session, "info", "Skills left out of the model's list",
                         escaped(f"The list of skills is limited in size; {len(dropped)} are "
                                 f"not in it (they still load by name): {', '.join(dropped)}."),
                         fallback=True)  # fmt: skip
        return text

    def facts(self, session: Session) -> ModelInfo:
        """The session model's facts, its window within what the server said in a
        context-length error."""
        info = self.models.model_info_for(session.model)
        if session.window_limit and session.window_limit < info.context_window:
            info = msgspec.structs.replace(info, context_window=session.window_limit)
        return info

    def provider(self, session: Session) -> Resilient:
        """The session's model behind the resilience policy. Every retry is announced with
        a notice; a client without notices is told of waits of ``SHOW_WAIT_AFTER`` seconds
        or more by an agent message, so nobody waits on a rate limit in silence."""
        retries = self.models.retry_policy.max_retries

        async def on_retry(exc: ProviderError, attempt: int, delay: float) -> None:
            limited = getattr(exc, "status", None) == 429
            title = "Rate limited; waiting" if limited else "Model request failed; retrying"
            await notify(
                self.client,
                session,
                "warning",
                title,
                f"{exc.message.rstrip('.')}. Retry {attempt} of {retries} in {_seconds(delay)}.",
                fallback=delay >= SHOW_WAIT_AFTER,
            )

        return self.models.resilient(session.model, on_retry)

    async def rules_for(self, session: Session) -> Rules:
        """The project's remembered "always" answers (shared by its sessions, persisted)."""
        root = session.root
        rules = self._rules.get(root.cwd)
        if rules is None:
            store = self.sessions.store
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
        if self._tools is None:  # after initialize: the client's capabilities are known
            tools = builtin_tools(self.subagents.tool, SkillTool()).tools()
            if "form" not in elicitation_modes(self.client.capabilities):
                tools = [tool for tool in tools if tool.spec.name != ASK_USER]  # asks by a form
            self._tools = Toolset(tools)
        if session.mcp is None:
            return self._tools
        return session.mcp.toolset(self._tools)

    @functools.cached_property
    def child_env(self) -> dict[str, str]:
        """The environment of commands run for the model: ours without the secrets."""
        return child_environ(self.models.config)

    async def prepare(self, session: Session) -> None:
        """What the session's first turn would otherwise do first: its model's provider
        (a loaded session may use another model; no SDK but its model's is imported),
        its system prompt (the environment read, git asked: tens of ms in a large
        repository), its project's permission rules and the tools; and, unless the
        family's ``connect-ahead`` is off, the connection to the model's server opened
        (a compatible server is asked its limits on the way)."""
        await self.warmup.warmed(turn=False)
        if not self.sessions.is_open(session):
            return  # closed meanwhile
        await self.models.prepare(session.model, rehearse=not self.warmup.waiting)
        ahead = self.models.connects_ahead(session.model)
        if ahead is not None and not session.busy:
            self.background(ahead.connect())  # (a turn under way makes its own)
        if session.system_text is None:
            text = await self.system_prompt(session)
            self._prebuilt[session] = (text, session.mode, session.model)
        await self.rules_for(session)
        self.tools_for(session)
        self.child_env  # noqa: B018 (built once: every family's secret names)
        log.debug("session prepared", session_id=session.id)


def _seconds(delay: float) -> str:
    return f"{delay:.1f} s" if delay >= 1 else f"{delay * 1000:.0f} ms"
