"""Command line: ``acp-agent [--model ...]`` speaks ACP over stdin/stdout."""

from __future__ import annotations

import gc
import os
import sys
from typing import TYPE_CHECKING, Any

from . import __version__

if TYPE_CHECKING:
    import argparse
    from types import SimpleNamespace

    from .config import Config

DESCRIPTION = """\
An Agent Client Protocol (ACP) agent. Editors start it as a subprocess and speak
JSON-RPC to it over stdin/stdout; stdout carries nothing but protocol messages.
With no provider configured it runs the offline built-in model (no key, no network)."""

def epilog() -> str:
    """The environment the agent reads: each provider family's variables, then ours."""
    from .providers.registry import FAMILIES, spec

    lines = ["environment:"]
    for family in FAMILIES:
        s = spec(family)
        names = [*s.key_envs[:1], *([s.base_url_env] if s.base_url_env else [])]
        if names:
            lines.append(f"  {', '.join(names):<38} used by --model {family}:<model>")
    lines += [
        "  ACP_AGENT_MODEL, ACP_AGENT_STATE_DIR, ACP_AGENT_LOG_LEVEL, ACP_AGENT_LOG_FILE,",
        "  ACP_AGENT_DEFAULT_MODE                 the same as the flags below",
        "precedence: flags > environment > config file > defaults",
    ]
    return "\n".join(lines)


HUMAN_EPILOG = """\
The agent runs as a subprocess and is driven through the protocol, as an editor would.
Permission questions are asked at the keyboard; without a terminal to ask on, tool
calls that need permission are not run (--yes, --allow-always and --deny decide
instead). Ctrl-C cancels the running turn (at a question: rejects and cancels); a second
Ctrl-C, or Ctrl-C or Ctrl-D at the prompt, quits. `run` keeps no session unless --save
is given; `chat` keeps its session (--no-save deletes it at the end)."""


def build_parser() -> argparse.ArgumentParser:
    import argparse  # not on the way to `initialize`: editors usually pass no flags

    p = argparse.ArgumentParser(
        prog="acp-agent",
        description=DESCRIPTION
        + "\n\nAlso: `acp-agent run PROMPT` and `acp-agent chat`, `acp-agent login` and"
        " `acp-agent logout` (store or forget a provider's API key; see their --help).",
        epilog=epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"acp-agent {__version__}")
    _agent_flags(p)
    return p


def build_human_parser(command: str) -> argparse.ArgumentParser:
    import argparse

    p = argparse.ArgumentParser(
        prog=f"acp-agent {command}",
        description="Run one prompt in the terminal."
        if command == "run"
        else "Chat with the agent in the terminal.",
        epilog=HUMAN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if command == "run":
        p.add_argument("prompt", help="the prompt text")
    policy = p.add_mutually_exclusive_group()
    policy.add_argument(
        "--yes", "-y", dest="policy", action="store_const", const="allow_once",
        help="allow each tool call that asks, once, without asking",
    )  # fmt: skip
    policy.add_argument(
        "--allow-always", dest="policy", action="store_const", const="allow_always",
        help="answer \"always\" to each question (remembered for the project, as the "
        "option says)",
    )  # fmt: skip
    policy.add_argument(
        "--deny", dest="policy", action="store_const", const="deny",
        help="reject each tool call that asks",
    )  # fmt: skip
    p.add_argument(
        "--save",
        action=argparse.BooleanOptionalAction,
        default=command == "chat",
        help="keep the session in the state directory "
        + ("(default for chat)" if command == "chat" else "(default for run: not kept)"),
    )
    if command == "run":
        p.add_argument(
            "--json",
            action="store_true",
            help="print the ACP updates as JSON lines (then the prompt's result) for scripts",
        )
    p.add_argument("--cwd", default=None, help="the session's directory (default: current)")
    p.add_argument(
        "--debug",
        action="store_true",
        help="show the agent's log (debug level unless --log-level) and any traceback",
    )
    _agent_flags(p)
    return p


def _agent_flags(p: argparse.ArgumentParser) -> None:
    from .providers.registry import FAMILIES, spec

    p.add_argument(
        "--model",
        metavar="SPEC",
        help=" | ".join(f if not spec(f).needs_model else f"{f}:<model>" for f in FAMILIES)
        + " (default: offline)",
    )
    p.add_argument(
        "--base-url",
        metavar="URL",
        help="endpoint of the model's provider, e.g. an OpenAI-compatible server "
        "(Ollama, vLLM, llama.cpp, LM Studio, OpenRouter)",
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        help="TOML configuration file (default: $XDG_CONFIG_HOME/acp-agent/config.toml)",
    )
    p.add_argument(
        "--state-dir",
        metavar="DIR",
        help="where sessions are stored (default: $XDG_STATE_HOME/acp-agent)",
    )
    p.add_argument(
        "--mode",
        choices=["ask", "accept-edits", "plan", "bypass"],
        help="default permission mode of new sessions (default: ask)",
    )
    p.add_argument(
        "--log-level",
        choices=["debug", "info", "warning", "error", "critical"],
        help="log verbosity; logs go to stderr or --log-file (default: warning)",
    )
    p.add_argument("--log-file", metavar="FILE", help="append logs to FILE instead of stderr")


def _forward(args: argparse.Namespace) -> list[str]:
    """The agent flags given to the human mode, for its agent subprocess."""
    out: list[str] = []
    for flag in ("model", "base_url", "config", "state_dir", "mode", "log_level", "log_file"):
        value = getattr(args, flag)
        if value:
            out += ["--" + flag.replace("_", "-"), value]
    return out


def human_main(argv: list[str]) -> None:
    args = build_human_parser(argv[0]).parse_args(argv[1:])
    from . import config as config_mod

    try:
        cfg = load_config(args)
    except config_mod.ConfigError as exc:
        sys.stderr.write(f"acp-agent: {exc}\n")
        raise SystemExit(2) from None
    from .human import main as human

    raise SystemExit(human(argv[0], args, cfg, _forward(args)))


def _overrides(args: argparse.Namespace | SimpleNamespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if args.model:
        out["model"] = args.model
    if args.state_dir:
        out["state-dir"] = args.state_dir
    if args.mode:
        out["default-mode"] = args.mode
    if args.log_level:
        out["log-level"] = args.log_level
    if args.log_file:
        out["log-file"] = args.log_file
    return out


_VALUE_FLAGS = ("model", "base_url", "config", "state_dir", "mode", "log_level", "log_file")
LOGIN_COMMANDS = ("login", "logout")


def _login_command(argv: list[str]) -> int | None:
    """Where ``login``/``logout`` stands: first, or after agent flags (an editor's terminal
    authentication appends it to the command it runs the agent with)."""
    i = 0
    while i < len(argv):
        if argv[i] in LOGIN_COMMANDS:
            return i
        if not argv[i].startswith("--"):
            return None
        flag, eq, _ = argv[i].partition("=")
        i += 2 if not eq and flag[2:].replace("-", "_") in _VALUE_FLAGS else 1
    return None


def _plain_flags(argv: list[str]) -> SimpleNamespace | None:
    """The agent flags in their plain forms (``--flag value``, ``--flag=value``), or
    ``None`` when anything else is there. Values are validated with the configuration."""
    from types import SimpleNamespace

    values: dict[str, str | None] = dict.fromkeys(_VALUE_FLAGS)
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


def load_config(args: argparse.Namespace | SimpleNamespace) -> Config:
    """The configuration the flags, the environment and the file give
    (``config.ConfigError`` names what is wrong)."""
    from . import config as config_mod

    if args.model:
        _check_model_flag(args.model)
    overrides = _overrides(args)
    cfg = config_mod.load(args.config, overrides=overrides)
    if args.base_url:
        from .providers import spec

        if not spec(cfg.provider).remote:
            raise config_mod.ConfigError(
                f"--base-url needs a model served over the network, not {cfg.model!r}"
            )
        overrides[cfg.provider] = {"base-url": args.base_url}
        cfg = config_mod.load(args.config, overrides=overrides)
    return cfg


def _check_model_flag(model: str) -> None:
    """``--model`` in words a person reads at once (the configuration says it again, for
    files and the environment, in its own terms)."""
    from .config import ConfigError
    from .providers.registry import FAMILIES, spec

    family, _, name = model.partition(":")
    if family not in FAMILIES:
        raise ConfigError(
            f"--model {model!r}: unknown provider {family!r}; write <provider>:<model> with "
            f"a provider among {', '.join(FAMILIES)}, e.g. openai:gpt-4.1"
        )
    family_spec = spec(family)
    if family_spec.needs_model and not name:
        example = family_spec.example
        raise ConfigError(
            f"--model {model!r} names a provider but no model: write {family}:<model>"
            + (f", e.g. {family}:{example}" if example else "")
        )


def _collect() -> None:
    gc.freeze()
    gc.enable()


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("run", "chat"):
        human_main(argv)
    at = _login_command(argv)
    if at is not None:
        from .login import main as login_main

        raise SystemExit(login_main(argv[at], argv[:at] + argv[at + 1 :]))
    # argparse (with gettext and shutil) costs ~25 ms of start-up on a small machine:
    # the plain `--flag value` forms editors use are read directly; anything else
    # (--help, --version, a typo, a missing value) goes through argparse.
    # Start-up allocates much and frees little: no cyclic collection until the
    # ``initialize`` reply is written (then what start-up made is frozen out of every
    # later collection's walk); ~1.5 ms of a ~50 ms start here.
    gc.disable()
    plain = _plain_flags(argv)
    args: argparse.Namespace | SimpleNamespace = (
        plain if plain is not None else build_parser().parse_args(argv)
    )
    from . import config as config_mod
    from . import log

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

    from .server import serve

    # Not asyncio.run(): its shutdown waits for the default executor's threads, and one
    # may still be importing a provider or MCP SDK (a second or more). Once serve()
    # returns, every turn has ended and the output is flushed: exit at once.
    code = 0
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(serve(cfg, initialized=_collect, reload=lambda: load_config(args)))
    except KeyboardInterrupt:
        code = 130
        if sys.stdin.isatty():  # Ctrl-C typed after the hint: the shell's prompt on its line
            sys.stderr.write("\n")
    sys.stderr.flush()
    os._exit(code)
