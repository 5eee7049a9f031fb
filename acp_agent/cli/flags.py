"""The agent's own flags (``--model``, ``--config``, ...), which every command takes
wherever they stand on the line, and the configuration they give."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse
    from collections.abc import Collection
    from types import SimpleNamespace

    from ..config import Config

#: The agent's flags: (flag, argparse keywords); each takes a value.
AGENT_FLAGS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("--model", {"metavar": "SPEC"}),
    ("--base-url", {"metavar": "URL", "help": "endpoint of the model's provider, e.g. an "
                    "OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio, OpenRouter)"}),
    ("--config", {"metavar": "FILE", "help": "TOML configuration file "
                  "(default: $XDG_CONFIG_HOME/acp-agent/config.toml)"}),
    ("--state-dir", {"metavar": "DIR",
                     "help": "where sessions are stored (default: $XDG_STATE_HOME/acp-agent)"}),
    ("--mode", {"choices": ["ask", "accept-edits", "auto", "plan", "bypass"],
                "help": "default permission mode of new sessions (default: ask; auto runs "
                "commands in a sandbox without asking: it needs bubblewrap)"}),
    ("--sandbox", {"choices": ["workspace-write", "read-only", "off"],
                   "help": "the sandbox level auto mode runs commands at "
                   "(default: workspace-write)"}),
    ("--log-level", {"choices": ["debug", "info", "warning", "error", "critical"],
                     "help": "log verbosity; logs go to stderr or --log-file (default: warning)"}),
    ("--log-file", {"metavar": "FILE", "help": "append logs to FILE instead of stderr"}),
)  # fmt: skip
VALUE_FLAGS = tuple(flag[2:].replace("-", "_") for flag, _ in AGENT_FLAGS)


def agent_flags(p: argparse._ActionsContainer, shown: Collection[str] | None = None) -> None:
    """Add the agent's flags to ``p``; with ``shown``, the others are accepted but not
    listed in the help (``login`` takes every flag an editor's command line has)."""
    import argparse

    from ..providers.registry import FAMILIES, spec

    for flag, kwargs in AGENT_FLAGS:
        kwargs = dict(kwargs)
        if flag == "--model":
            kwargs["help"] = " | ".join(
                f if not spec(f).needs_model else f"{f}:<model>" for f in FAMILIES
            ) + " (default: offline)"
        if shown is not None and flag not in shown:
            kwargs["help"] = argparse.SUPPRESS
        p.add_argument(flag, **kwargs)


def agent_args(args: argparse.Namespace) -> list[str]:
    """The agent flags given to a command, as the agent's own command line."""
    out: list[str] = []
    for flag in VALUE_FLAGS:
        value = getattr(args, flag)
        if value:
            out += ["--" + flag.replace("_", "-"), value]
    return out


def _overrides(args: argparse.Namespace | SimpleNamespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if args.model:
        out["model"] = args.model
    if args.state_dir:
        out["state-dir"] = args.state_dir
    if args.mode:
        out["default-mode"] = args.mode
    if getattr(args, "sandbox", None):
        out["sandbox"] = {"level": args.sandbox}
    if args.log_level:
        out["log-level"] = args.log_level
    if args.log_file:
        out["log-file"] = args.log_file
    return out


def load_config(args: argparse.Namespace | SimpleNamespace) -> Config:
    """The configuration the flags, the environment and the file give
    (``config.ConfigError`` names what is wrong)."""
    from .. import config as config_mod
    from ..providers import check, spec

    if args.model:
        _check_model_flag(args.model)
    overrides = _overrides(args)
    cfg = config_mod.load(args.config, overrides=overrides, check=check)
    if args.base_url:

        if not spec(cfg.provider).remote:
            raise config_mod.ConfigError(
                f"--base-url needs a model served over the network, not {cfg.model!r}"
            )
        overrides[cfg.provider] = {"base-url": args.base_url}
        cfg = config_mod.load(args.config, overrides=overrides, check=check)
    if config_mod.sandbox_needs(cfg):  # a sandbox the configuration needs must work here
        from ..engine.sandboxing import start_check

        start_check(cfg)
    return cfg


def _check_model_flag(model: str) -> None:
    """``--model`` in words a person reads at once (the configuration says it again, for
    files and the environment, in its own terms)."""
    from ..config import ConfigError
    from ..providers.registry import FAMILIES, spec

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


