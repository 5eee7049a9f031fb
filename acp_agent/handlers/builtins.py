"""The built-in slash commands run (``/help``, ``/mode``, ``/plan``, ``/model``,
``/permissions``, ``/undo``, ``/rewind``, ``/compact``), prompt commands, skills and MCP
prompts expanded: :func:`dispatch` handles the one a prompt starts with (the list
offered is :mod:`.commands`'s)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ..engine.compaction import compact_session
from ..engine.permissions import chosen, listing, numbered
from ..mcp import PromptError
from ..protocol import types as t
from ..providers.registry import FAMILIES, missing_key, spec
from ..sessions.session import Session
from .commands import find_skills, help_text, parse_invocation, session_commands, skill_notice
from .options import mode_ids, mode_refusal, switch_mode, switch_model
from .undo import rewind, undo

if TYPE_CHECKING:
    from .services import Services


async def dispatch(
    sv: Services, session: Session, blocks: list[t.ContentBlock]
) -> t.PromptResponse | list[t.ContentBlock]:
    """Handle a leading ``/command``: a built-in answers by itself (a response) or changes
    what the model sees; a prompt command expands. Other prompts pass as they are."""
    first = blocks[0] if blocks else None
    invocation = parse_invocation(first.text.strip()) if isinstance(first, t.TextContent) else None
    if invocation is None:
        return blocks
    name, rest = invocation
    tail = blocks[1:]
    done = t.PromptResponse(stop_reason="end_turn")
    if name == "help":
        await session.say(help_text(session))
        return done
    if name in ("mode", "plan"):
        target = "plan" if name == "plan" else rest
        if target:
            refusal = mode_refusal(sv, target)
            if refusal is not None:
                await session.say(f"Not switched: {refusal} (one of {', '.join(mode_ids(sv))}).")
                return done
            await switch_mode(sv, session, target)
        if name == "plan" and rest:
            return [t.TextContent(text=f"Plan this task (plan mode: read-only): {rest}"), *tail]
        await session.say(f"Mode: **{session.mode}**.")
        return done
    if name == "model":
        if rest:
            problem = model_problem(sv, rest)
            if problem is not None:
                await session.say(f"{problem} The model stays **{session.model}**.")
                return done
            await switch_model(sv, session, rest)
        await session.say(
            f"Model: **{session.model}** (configured: {', '.join(sv.models.choices)}; any"
            " `<provider>:<model>` works)."
        )
        return done
    if name == "permissions":
        await session.say(await permissions_command(sv, session, rest))
        return done
    if name == "undo":
        await undo(sv, session)
        return done
    if name == "rewind":
        await rewind(sv, session, rest)
        return done
    if name == "compact":
        await compact_session(await sv.turns.context(session), rest or None, keep_tokens=0)
        return done
    command = session.prompt_commands.get(name) or session.skills.get(name)
    if command is not None:
        return [t.TextContent(text=command.expand(rest)), *tail]
    if session.mcp is not None and any(p.name == name for p in session.mcp.prompts()):
        try:
            return [*await session.mcp.get_prompt(name, rest), *tail]
        except PromptError as exc:
            await session.say(f"`/{name}` failed: {exc}")
            return done
    return blocks  # not ours: the model reads it as text


async def permissions_command(sv: Services, session: Session, rest: str) -> str:
    """``/permissions``: the project's remembered answers, numbered as ``acp-agent
    permissions`` numbers them; ``/permissions forget N|all`` takes some back, here and
    on disk."""
    rules = await sv.turns.rules_for(session)
    await asyncio.to_thread(rules.refresh)
    rows = numbered(sorted(rules.allowed), sorted(rules.rejected))
    project = rules.project or session.root.cwd
    words = rest.split()
    if words and words[0] == "forget":
        try:
            keys = chosen(rows, words[1:] or ["?"], project)
        except ValueError as exc:
            return f"Nothing forgotten: {exc}."
        try:
            await asyncio.to_thread(rules.forget, keys)
        except OSError as exc:
            return f"Nothing forgotten: the rules file cannot be written ({exc.strerror})."
        return f"Forgotten ({len(keys)}): the next such call asks again."
    if words:
        return "Use `/permissions` to list, `/permissions forget N` or `forget all` to take back."
    if not rows:
        return f"No remembered answers for {project}: every call that asks, asks."
    lines = "\n".join(f"    {line}" for line in listing(rows, project))
    return (f"Remembered for {project}:\n\n{lines}\n\n`/permissions forget N` takes one"
            " back; `/permissions forget all`, every one.")


def model_problem(sv: Services, model: str) -> str | None:
    """Why ``/model`` cannot switch to ``model`` (a spec that names no model, a provider
    the client disabled, a key nowhere to be found), or ``None``."""
    family, _, name = model.partition(":")
    if family not in FAMILIES:
        return (f"`{model}` is not a model: write `<provider>:<model>` with a provider among"
                f" {', '.join(FAMILIES)} (e.g. `openai:gpt-4.1`).")  # fmt: skip
    if spec(family).needs_model and not name:
        return f"`{model}` names no model: write `{family}:<model>`."
    if family in sv.models.disabled:
        return f"The editor disabled the {spec(family).title} provider."
    needed = missing_key(sv.config, model)
    if needed is not None:
        return (f"`{model}` needs an API key: run `acp-agent login --provider {family}` in a"
                f" terminal (or set {needed} where the agent starts), then `/model {model}`"
                " again.")  # fmt: skip
    return None


async def refresh_skills(sv: Services, session: Session) -> None:
    """Before a prompt: the skills as they are on disk now (changes are picked up for the
    next turn); new problems are told, and the commands offered again if they changed."""
    before = [(c.name, c.description, c.hint) for c in session.skills.values()]
    for refusal in await asyncio.to_thread(find_skills, session, sv.child_env):
        await sv.notify(session, *skill_notice(refusal), fallback=True)
    if [(c.name, c.description, c.hint) for c in session.skills.values()] != before:
        await sv.client.session_update(
            session.id, t.AvailableCommandsUpdate(available_commands=session_commands(session))
        )
