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
from ..engine.projectrules import Nested
from ..engine.sandboxing import Sandboxing
from ..engine.skills import SkillTool, catalogue
from ..engine.subagents import MAX_DEPTH, Subagents
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
from ..tools.usershell import LoginEnvironment, login_environment, user_shell
from ..tools.webfetch import WebFetch, WebSettings
from .background import Background
from .warmup import Warmup

WEB_FETCH = WebFetch.name
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
        sandboxing: Sandboxing,
        child_env: dict[str, str],
    ) -> None:
        self.models = models
        self.child_env = child_env
        """The environment of commands run for the model: ours without the secrets."""
        self.sandboxing = sandboxing
        self.background = background
        self.client = client
        self.sessions = sessions
        self.warmup = warmup
        self.subagents = Subagents(client, self.context, sessions)
        self._rules: dict[str, Rules] = {}
        self._tools: dict[tuple[str, bool], Toolset] = {}  # by tool style, spawning
        self._prebuilt: weakref.WeakKeyDictionary[Session, tuple[str, str, str]] = (
            weakref.WeakKeyDictionary()
        )  # a session's system prompt built before its first turn, with its mode and model
        self._login: weakref.WeakKeyDictionary[Session, asyncio.Future[LoginEnvironment]] = (
            weakref.WeakKeyDictionary()
        )  # each top-level session's login environment, read once
        self._nested: weakref.WeakKeyDictionary[Session, Nested] = weakref.WeakKeyDictionary()
        self._told_dropped: set[tuple[str, str]] = set()  # (session id, skills left out)
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
        if (ahead and session.system_text is ahead[0] and not session.history
                and (session.mode, session.model) != ahead[1:]):  # fmt: skip
            session.system_text = None  # changed since it was built ahead, unused: build it now
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
            sandboxing=self.sandboxing,
            login_env=functools.partial(self.login, session),
            nested=self._nested.setdefault(session.root, Nested(session.root.cwd, session.roots)),
            web=self.web,
            outputs=self.outputs_dir(session),
            checkpoint=self.checkpoints.recorder_of(session),
        )

    def outputs_dir(self, session: Session) -> str:
        """Where the session's cut command outputs are saved whole (its top-level
        session's; removed with it: ``Store.delete``)."""
        return os.path.join(os.path.dirname(self.sessions.store.root), "outputs",
                            session.root.id)  # fmt: skip

    async def login(self, session: Session) -> LoginEnvironment:
        """The environment of the user's login shell, read once per top-level session
        (``tools.usershell``), under the same secret filter as the agent's own."""
        root = session.root
        pending = self._login.get(root)
        if pending is None:
            pending = asyncio.ensure_future(
                login_environment(user_shell(), root.cwd, self.child_env)
            )
            self._login[root] = pending
        got = await asyncio.shield(pending)
        if got.env is None:
            return got
        return LoginEnvironment(child_environ(self.models.config, got.env))

    def shell_line(self) -> str:
        """What the environment section says of the shell: exactly what runs."""
        shell = user_shell()
        runs = f"commands run as `{shell.path} -c <command>` ({shell.why})"
        if self.client.allows("terminal/create"):
            return f"{runs} in the editor's terminal, with the editor's environment"
        if shell.name == "sh":
            return f"{runs}, with the agent's environment"
        return (f"{runs}, with the environment of your login shell (`{shell.path} -l`), read "
                "once when the first command runs")  # fmt: skip

    async def system_prompt(self, session: Session) -> str:
        """The session's system prompt (``instructions``: git runs with the commands'
        environment; a refused instruction file is told by a notice, else a message)."""

        async def tell(title: str, description: str) -> None:
            await notify(self.client, session, "warning", title, description, fallback=True)

        built = session.system_text is None
        text = await system_prompt(
            session,
            configured=self.models.config.system_prompt,
            env=self.child_env,
            tell=tell,
            shell=self.shell_line(),
            style=self.facts(session).tool_style,
            delegate=_depth(session) < MAX_DEPTH,
        )
        _, dropped = catalogue(session.skills) if built else ("", [])
        key = (session.id, ",".join(dropped))
        if dropped and session.parent is None and key not in self._told_dropped:
            self._told_dropped.add(key)
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
        """The built-in tools of the session model's tool style (``ModelInfo.tool_style``)
        and the session's MCP tools, the same in every mode; ``ask_user`` only for a
        client that takes form elicitations. MCP tools follow the servers' changes."""
        style = self.facts(session).tool_style
        spawns = _depth(session) < MAX_DEPTH  # a child's child would be one level too deep
        built = self._tools.get((style, spawns))
        if built is None:  # after initialize: the client's capabilities are known
            extra = (self.subagents.tool,) if spawns else ()
            tools = builtin_tools(*extra, SkillTool(), style=style).tools()
            if "form" not in elicitation_modes(self.client.capabilities):
                tools = [tool for tool in tools if tool.spec.name != ASK_USER]  # asks by a form
            if self.web is None:
                tools = [tool for tool in tools if tool.spec.name != WEB_FETCH]
            built = self._tools[(style, spawns)] = Toolset(tools)
        if session.mcp is None:
            return built
        return session.mcp.toolset(built)

    @property
    def web(self) -> WebSettings | None:
        """What web_fetch may do (``None``: ``[web] enabled = false``)."""
        config = self.models.config
        if not config.web.enabled:
            return None
        limits = config.limits
        return WebSettings(config.web.allow_private, limits.web_timeout, limits.web_max_bytes,
                           limits.web_max_chars)  # fmt: skip

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
        log.debug("session prepared", session_id=session.id)


def _depth(session: Session) -> int:
    """How many sessions above ``session`` (a subagent's parent, and so on)."""
    depth = 0
    while session.parent is not None:
        depth, session = depth + 1, session.parent
    return depth


def _seconds(delay: float) -> str:
    return f"{delay:.1f} s" if delay >= 1 else f"{delay * 1000:.0f} ms"
