"""Command line: ``acp-agent [--model ...]`` speaks ACP over stdin/stdout."""

from __future__ import annotations

import gc
import os
import sys
from typing import TYPE_CHECKING

from .. import __version__
from .flags import VALUE_FLAGS, agent_flags, load_config

if TYPE_CHECKING:
    import argparse
    from types import SimpleNamespace

DESCRIPTION = """\
An Agent Client Protocol (ACP) agent. Editors start it as a subprocess and speak
JSON-RPC to it over stdin/stdout; stdout carries nothing but protocol messages.
With no provider configured it runs the offline built-in model (no key, no network)."""

USAGE = """acp-agent [AGENT FLAGS]                 speak ACP on stdin/stdout (what editors run)
       acp-agent COMMAND [FLAGS] [ARGS...]     (agent flags go before or after COMMAND)"""


class Subcommand:
    """One ``acp-agent COMMAND``: its synopsis for the help, and its entry point
    (``module:function``, called with the command's name and the rest of the line, agent
    flags included; it returns the exit status). A plain class: a ``NamedTuple`` costs
    start-up a millisecond to define."""

    __slots__ = ("entry", "summary", "synopsis")

    def __init__(self, synopsis: str, summary: str, entry: str) -> None:
        self.synopsis = synopsis
        self.summary = summary
        self.entry = entry


#: Every command, in the order the help lists them. A new one is a line here.
SUBCOMMANDS: dict[str, Subcommand] = {
    "run": Subcommand("run PROMPT...", "run one prompt in the terminal; stdin too when piped",
                      "acp_agent.cli.run:main"),
    "chat": Subcommand("chat", "chat in the terminal (--continue, --resume [ID])",
                       "acp_agent.cli.run:main"),
    "sessions": Subcommand("sessions", "list this directory's saved sessions (--all: every one)",
                           "acp_agent.cli.sessions:main"),
    "permissions": Subcommand("permissions", "list or forget the remembered \"always\" answers",
                              "acp_agent.cli.permissions:main"),
    "doctor": Subcommand("doctor", "check the set-up: configuration, keys, servers, state",
                         "acp_agent.cli.doctor:main"),
    "serve": Subcommand("serve", "serve the agent over the network (Streamable HTTP, WebSocket)",
                        "acp_agent.cli.serve:main"),
    "login": Subcommand("login", "store a provider's API key (asked without echo)",
                        "acp_agent.cli.login:main"),
    "logout": Subcommand("logout", "forget the API keys login stored", "acp_agent.cli.login:main"),
}  # fmt: skip


def commands_help() -> str:
    width = max(len(c.synopsis) for c in SUBCOMMANDS.values()) + 2
    lines = ["commands (each has --help):"]
    lines += [f"  {c.synopsis:<{width}}{c.summary}" for c in SUBCOMMANDS.values()]
    return "\n".join(lines)


def epilog() -> str:
    """The environment the agent reads: each provider family's variables, then ours."""
    from ..config import ENV_VARS
    from ..providers.registry import FAMILIES, spec

    rows: list[tuple[str, str]] = []
    for family in FAMILIES:
        s = spec(family)
        names = [*s.key_envs[:1], *([s.base_url_env] if s.base_url_env else [])]
        if names:
            rows.append((", ".join(names), f"used by --model {family}:<model>"))
    flags = {"model": "--model", "state-dir": "--state-dir", "log-level": "--log-level",
             "log-file": "--log-file", "default-mode": "--mode"}  # fmt: skip
    for name, key in ENV_VARS.items():
        rows.append((name, f"as {flags[key]}" if key in flags else f"`{key}` in the file"))
    width = max(len(name) for name, _ in rows) + 2
    lines = ["environment:", *(f"  {name:<{width}}{what}" for name, what in rows)]
    lines.append("precedence: flags > environment > config file > defaults")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    import argparse  # not on the way to `initialize`: editors usually pass no flags

    p = argparse.ArgumentParser(
        prog="acp-agent",
        usage=USAGE,
        description=DESCRIPTION + "\n\n" + commands_help(),
        epilog=epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"acp-agent {__version__}")
    agent_flags(p.add_argument_group("agent flags"))
    return p


def subcommand(argv: list[str]) -> int | None:
    """Where the command stands in ``argv``: the first word that is not a flag nor a
    flag's value (flags may come before it: an editor's terminal authentication appends
    ``login`` to the command it runs the agent with); ``None`` when there is none.
    Raises ``SystemExit`` (2) for a word that is not a command."""
    i = 0
    ours = True  # every flag so far is an agent flag
    while i < len(argv):
        word = argv[i]
        if word == "--":
            return None
        if not word.startswith("-") or word == "-":
            if word in SUBCOMMANDS:
                return i
            if not ours:  # maybe an unknown flag's value: argparse names the flag
                return None
            from ..config.hints import did_you_mean

            sys.stderr.write(
                f"acp-agent: {word!r} is not a command{did_you_mean(word, SUBCOMMANDS)}"
                f" (commands: {', '.join(SUBCOMMANDS)}; acp-agent --help)\n"
            )
            raise SystemExit(2)
        flag, eq, _ = word.partition("=")
        known = flag[2:].replace("-", "_") in VALUE_FLAGS
        ours = ours and known
        i += 2 if not eq and known else 1
    return None


def run_subcommand(argv: list[str], at: int) -> int:
    import importlib

    name = argv[at]
    module, _, function = SUBCOMMANDS[name].entry.partition(":")
    entry = getattr(importlib.import_module(module), function)
    status: int = entry(name, argv[:at] + argv[at + 1 :])
    return status


def _plain_flags(argv: list[str]) -> SimpleNamespace | None:
    """The agent flags in their plain forms (``--flag value``, ``--flag=value``), or
    ``None`` when anything else is there. Values are validated with the configuration."""
    from types import SimpleNamespace

    values: dict[str, str | None] = dict.fromkeys(VALUE_FLAGS)
    i = 0
    while i < len(argv):
        flag, eq, value = argv[i].partition("=")
        name = flag[2:].replace("-", "_")
        if not flag.startswith("--") or name not in values or values[name] is not None:
            return None
        if not eq:
            if i + 1 >= len(argv) or argv[i + 1].startswith("-"):
                return None
            i += 1
            value = argv[i]
        if not value:
            return None
        values[name] = value
        i += 1
    return SimpleNamespace(**values)


TERMINAL_HINT = (
    "acp-agent speaks the Agent Client Protocol (JSON-RPC) on stdin/stdout, for editors; "
    "to chat here, run `acp-agent chat` (Ctrl-D ends this).\n"
)


def _collect() -> None:
    gc.freeze()
    gc.enable()


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    at = subcommand(argv)
    if at is not None:
        raise SystemExit(run_subcommand(argv, at))
    # argparse (with gettext and shutil) costs ~25 ms of start-up on a small machine:
    # the plain `--flag value` forms editors use are read directly; anything else
    # (--help, --version, a typo, a missing value) goes through argparse.
    # Start-up allocates much and frees little: no cyclic collection until the
    # ``initialize`` reply is written (then what start-up made is frozen out of every
    # later collection's walk); ~1.5 ms of a ~50 ms start here.
    gc.disable()
    # Whether bubblewrap works here (the first session's modes say whether `auto` is
    # offered): a process of its own, started first, so that its answer is in by then.
    from ..engine.probe import start_probe

    start_probe()
    plain = _plain_flags(argv)
    args: argparse.Namespace | SimpleNamespace = (
        plain if plain is not None else build_parser().parse_args(argv)
    )
    from .. import config as config_mod
    from .. import log

    try:
        cfg = load_config(args)
    except config_mod.ConfigError as exc:
        sys.stderr.write(f"acp-agent: {exc}\n")
        raise SystemExit(2) from None
    try:
        log.configure(cfg.log_level, cfg.log_file)
    except OSError as exc:
        sys.stderr.write(f"acp-agent: log file {cfg.log_file}: {exc.strerror}\n")
        raise SystemExit(2) from None
    if sys.stdin.isatty():  # a person typed `acp-agent`: say what it is waiting for
        sys.stderr.write(TERMINAL_HINT)

    import asyncio
    import signal

    from ..server import serve

    # Ended by a signal (an editor quitting sends SIGTERM; a closed terminal SIGHUP), the
    # agent ends as at the end of stdin: turns cancelled, commands and MCP servers
    # stopped, everything flushed, status 0. Ctrl-C typed at a terminal stays an
    # interrupt (status 130); without one, SIGINT is another request to stop.
    stop = [signal.SIGTERM, signal.SIGHUP]
    if not sys.stdin.isatty():
        stop.append(signal.SIGINT)

    # Not asyncio.run(): its shutdown waits for the default executor's threads, and one
    # may still be importing a provider or MCP SDK (a second or more). Once serve()
    # returns, every turn has ended and the output is flushed: exit at once.
    code = 0
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(
            serve(cfg, initialized=_collect, stop_signals=stop, reload=lambda: load_config(args))
        )
    except KeyboardInterrupt:
        code = 130
        if sys.stdin.isatty():  # Ctrl-C typed after the hint: the shell's prompt on its line
            sys.stderr.write("\n")
    sys.stderr.flush()
    os._exit(code)
