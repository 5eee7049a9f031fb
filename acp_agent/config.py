"""Configuration: defaults < TOML file < environment < command-line flags.

The file format is the one documented in ``config.example.toml``. Unknown keys and
wrong types are errors that name the key (``ConfigError``). Secrets are never stored
here: the file names the environment variable that holds a key (``api_key_env``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, Literal

import msgspec

LogLevel = Literal["debug", "info", "warning", "error", "critical"]
ModeId = Literal["ask", "accept-edits", "plan", "bypass"]


class ConfigError(Exception):
    """A configuration value is wrong; the message names the key."""


class _Section(
    msgspec.Struct, forbid_unknown_fields=True, kw_only=True, rename="kebab", frozen=True
):
    pass


class ProviderSettings(_Section, frozen=True):
    """Endpoint settings for one provider family: a ``[<family>]`` section of the file
    (``[openai]``, ``[anthropic]``, ``[ollama]``, ...; see ``providers.registry``)."""

    base_url: str | None = None
    api_key_env: str | None = None
    timeout: float = 600.0
    connect_timeout: float = 10.0
    headers: dict[str, str] = {}
    api: Literal["auto", "responses", "chat-completions"] = "auto"
    """OpenAI-compatible families: the wire API (``auto``: the Responses API for OpenAI's
    reasoning models at OpenAI, Chat Completions otherwise)."""
    connect_ahead: bool = True
    """Open the connection to the model's server when a session opens (one small read-only
    request), so that its first prompt does not wait for it."""


class ModelOverride(_Section, frozen=True):
    context_window: int | None = None
    max_output_tokens: int | None = None
    input_price: float | None = None
    output_price: float | None = None
    cached_input_price: float | None = None
    cache_write_price: float | None = None
    supports_images: bool | None = None


class Limits(_Section, frozen=True):
    max_turn_requests: int = 50
    max_message_bytes: int = 256 * 1024 * 1024
    max_retries: int = 4
    retry_max_delay: float = 30.0
    first_event_timeout: float = 120.0
    idle_timeout: float = 60.0
    turn_timeout: float = 3600.0
    mcp_start_timeout: float = 10.0
    prune_at: float = 0.6
    compact_at: float = 0.85
    prompt_cache: bool = True


class Checkpoints(_Section, frozen=True):
    """``[checkpoints]``: what ``/undo`` and ``/rewind`` can put back (``engine.checkpoints``)."""

    enabled: bool = True
    max_size: int = 256 * 1024 * 1024
    """Bytes of a session's checkpoints (copies and snapshot); past it, the oldest go."""
    max_file_size: int = 1024 * 1024
    """A larger file (or a binary one in the snapshot) is known by its hash only."""
    snapshot: bool = True
    """Where git is installed, snapshot the whole workspace too (changes by commands)."""


class Config(_Section, frozen=True):
    model: str = "offline"
    models: list[str] = []
    thinking: Literal["off", "low", "medium", "high"] = "off"
    default_mode: ModeId = "ask"
    system_prompt: str | None = None
    state_dir: str | None = None
    log_level: LogLevel = "warning"
    log_file: str | None = None
    providers: dict[str, ProviderSettings] = {}
    """Per-family settings, keyed by family name (the file's ``[<family>]`` sections)."""
    model_overrides: dict[str, ModelOverride] = {}
    limits: Limits = Limits()
    checkpoints: Checkpoints = Checkpoints()
    offline_script: str | None = None
    keep_env: list[str] = []
    """Variables passed to commands although they look like secrets (see ``childenv``)."""

    @property
    def provider(self) -> str:
        """The configured model's family (``openai`` of ``openai:gpt-4.1``)."""
        return self.model.split(":", 1)[0]

    def provider_settings(self, family: str) -> ProviderSettings:
        return self.providers.get(family) or _NO_SETTINGS


_NO_SETTINGS = ProviderSettings()
_FIELDS = frozenset(f.encode_name for f in msgspec.structs.fields(Config))

ENV_VARS: Mapping[str, str] = {
    "ACP_AGENT_MODEL": "model",
    "ACP_AGENT_STATE_DIR": "state-dir",
    "ACP_AGENT_LOG_LEVEL": "log-level",
    "ACP_AGENT_LOG_FILE": "log-file",
    "ACP_AGENT_DEFAULT_MODE": "default-mode",
    "ACP_AGENT_OFFLINE_SCRIPT": "offline-script",
}


def default_config_path(env: Mapping[str, str] = os.environ) -> str:
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "acp-agent", "config.toml")


def default_state_dir(env: Mapping[str, str] = os.environ) -> str:
    base = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "acp-agent")


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


Check = Callable[["Config", str], None]
"""A further check of a configuration and where it came from (``providers.registry.check``:
the model families, their sections and APIs); raises ``ConfigError``."""


def from_mapping(
    raw: Mapping[str, Any], source: str = "config", check: Check | None = None
) -> Config:
    """A validated configuration from the file's structure (kebab-case keys). Top-level
    tables that are not settings of their own are provider sections (``[openai]``); which
    families exist is the provider registry's to say (``check``)."""
    sections = {k: v for k, v in raw.items() if k not in _FIELDS and isinstance(v, Mapping)}
    if sections:  # the file's [<family>] sections are the config's `providers`
        rest = {k: v for k, v in raw.items() if k not in sections}
        nested = rest.get("providers")
        raw = {**rest, "providers": {**(nested if isinstance(nested, Mapping) else {}), **sections}}
    try:
        config = msgspec.convert(raw, Config, str_keys=True)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{source}: {_describe(str(exc))}") from None
    validate(config, source)
    if check is not None:
        check(config, source)
    return config


def _describe(message: str) -> str:
    # msgspec says e.g. "Object contains unknown field `foo` - at `$.limits`"
    return message.replace("`$.", "`").replace("`$`", "the top level")


def validate(config: Config, source: str = "config") -> None:
    """The checks that need nothing but the configuration itself."""
    if config.limits.max_turn_requests < 1:
        raise ConfigError(f"{source}: `limits.max-turn-requests` must be at least 1")
    if not 0.1 <= config.limits.compact_at <= 1.0:
        raise ConfigError(f"{source}: `limits.compact-at` must be between 0.1 and 1.0")
    if not 0.1 <= config.limits.prune_at <= 1.0:
        raise ConfigError(f"{source}: `limits.prune-at` must be between 0.1 and 1.0")
    for name in ("first_event_timeout", "idle_timeout", "turn_timeout"):
        if getattr(config.limits, name) <= 0:
            raise ConfigError(f"{source}: `limits.{name.replace('_', '-')}` must be positive")
    if config.checkpoints.max_size < 0 or config.checkpoints.max_file_size < 0:
        raise ConfigError(f"{source}: `checkpoints` sizes must not be negative")
    if config.limits.max_message_bytes < 1024:
        raise ConfigError(f"{source}: `limits.max-message-bytes` must be at least 1024")


def load(
    path: str | None = None,
    env: Mapping[str, str] = os.environ,
    overrides: Mapping[str, Any] | None = None,
    check: Check | None = None,
) -> Config:
    """Build the configuration. ``path=None`` reads the user config file if it exists;
    ``overrides`` holds command-line values (kebab-case keys, nested dicts)."""
    merged: dict[str, Any] = {}
    file = path or default_config_path(env)
    if path or os.path.isfile(file):
        import tomllib

        try:
            with open(file, "rb") as fh:
                data = tomllib.load(fh)
        except OSError as exc:
            raise ConfigError(f"{file}: cannot read: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{file}: invalid TOML: {exc}") from None
        from_mapping(data, file, check)  # report file errors against the file
        merged = data
    env_values = {key: env[name] for name, key in ENV_VARS.items() if env.get(name)}
    if env_values:
        from_mapping(_merge(merged, env_values), "environment", check)
        merged = _merge(merged, env_values)
    if overrides:
        merged = _merge(merged, overrides)
    return from_mapping(merged, "command line" if overrides else "config", check)
