"""Configuration: defaults < TOML file < environment < command-line flags.

The file format is the one documented in ``config.example.toml``. Unknown keys and
wrong types are errors that name the key (``ConfigError``). Secrets are never stored
here: the file names the environment variable that holds a key (``api_key_env``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

import msgspec

LogLevel = Literal["debug", "info", "warning", "error", "critical"]
ModeId = Literal["ask", "accept-edits", "plan", "bypass"]


class ConfigError(Exception):
    """A configuration value is wrong; the message names the key (``path``: where it is,
    when known, so that a file's error can give the line)."""

    def __init__(self, message: str, path: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.path = path


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


def from_mapping(raw: Mapping[str, Any], source: str = "config") -> Config:
    """A validated configuration from the file's structure (kebab-case keys). A
    :class:`ConfigError` says ``source: <what is wrong>`` and carries the key's path."""
    from .confighints import shape_problem
    from .providers.registry import FAMILIES

    sections: dict[str, type[Any]] = {"limits": Limits, **dict.fromkeys(FAMILIES, ProviderSettings)}
    problem = shape_problem(
        raw, Config, sections, {"model-overrides": ModelOverride, "providers": ProviderSettings}
    )
    if problem is not None:
        path, text = problem
        raise ConfigError(f"{source}: {text}", path)
    sections_given = {k: v for k, v in raw.items() if k in FAMILIES}
    if sections_given:  # the file's [<family>] sections are the config's `providers`
        rest = {k: v for k, v in raw.items() if k not in FAMILIES}
        nested = rest.get("providers")
        raw = {**rest, "providers": {**(nested if isinstance(nested, Mapping) else {}),
                                     **sections_given}}  # fmt: skip
    try:
        config = msgspec.convert(raw, Config, str_keys=True)
    except msgspec.ValidationError as exc:  # what shape_problem did not foresee
        raise ConfigError(f"{source}: {_describe(str(exc))}") from None
    validate(config, source)
    return config


def _describe(message: str) -> str:
    # msgspec says e.g. "Object contains unknown field `foo` - at `$.limits`"
    return message.replace("`$.", "`").replace("`$`", "the top level")


def validate(config: Config, source: str = "config") -> None:
    from .providers.registry import FAMILIES, spec

    for where, model in [(("model",), config.model), *((("models",), m) for m in config.models)]:
        family, _, name = model.partition(":")
        if family not in FAMILIES:
            raise ConfigError(
                f"{source}: `{where[0]}` must be <family>:<model> with a family among "
                f"{', '.join(FAMILIES)} (e.g. 'openai:gpt-4.1'), got {model!r}",
                where,
            )
        if spec(family).needs_model and not name:
            raise ConfigError(
                f"{source}: `{where[0]}` {model!r} names no model; write {family}:<model>", where
            )
    unknown = sorted(set(config.providers) - set(FAMILIES))
    if unknown:
        raise ConfigError(f"{source}: unknown provider section(s) {', '.join(unknown)}")
    for family, settings in config.providers.items():
        apis = spec(family).apis
        if settings.api != "auto" and settings.api not in apis:
            choice = f"one of auto, {', '.join(apis)}" if apis else "auto (the only one)"
            raise ConfigError(
                f"{source}: `{family}.api` must be {choice}, got {settings.api!r}", (family, "api")
            )
    limits = config.limits

    def bad_limit(name: str, must: str) -> ConfigError:
        return ConfigError(f"{source}: `limits.{name}` must be {must}", ("limits", name))

    if limits.max_turn_requests < 1:
        raise bad_limit("max-turn-requests", "at least 1")
    if not 0.1 <= limits.compact_at <= 1.0:
        raise bad_limit("compact-at", "between 0.1 and 1.0")
    if not 0.1 <= limits.prune_at <= 1.0:
        raise bad_limit("prune-at", "between 0.1 and 1.0")
    for name in ("first_event_timeout", "idle_timeout", "turn_timeout"):
        if getattr(limits, name) <= 0:
            raise bad_limit(name.replace("_", "-"), "positive")
    if limits.max_message_bytes < 1024:
        raise bad_limit("max-message-bytes", "at least 1024")


def load(
    path: str | None = None,
    env: Mapping[str, str] = os.environ,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Build the configuration. ``path=None`` reads the user config file if it exists;
    ``overrides`` holds command-line values (kebab-case keys, nested dicts). A mistake is
    named where it was made: the file and line, or the variable."""
    merged: dict[str, Any] = {}
    file = path or default_config_path(env)
    if path or os.path.isfile(file):
        merged = _read_file(file)
    from .confighints import unknown_variable

    unknown = unknown_variable(env, ENV_VARS)
    if unknown is not None:
        raise ConfigError(unknown)
    env_values = {key: env[name] for name, key in ENV_VARS.items() if env.get(name)}
    for name, key in ENV_VARS.items():
        if env.get(name):
            from_mapping({key: env[name]}, name)  # each variable named in its own error
    if env_values:
        from_mapping(_merge(merged, env_values), "environment")
        merged = _merge(merged, env_values)
    if overrides:
        merged = _merge(merged, overrides)
    return from_mapping(merged, "command line" if overrides else "config")


def _read_file(file: str) -> dict[str, Any]:
    """The file's settings, checked: an error says ``file:line: ...``."""
    import tomllib

    try:
        with open(file, "rb") as fh:
            text = fh.read().decode("utf-8", "replace")
        data = tomllib.loads(text)
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: invalid TOML: {exc}") from None
    try:
        from_mapping(data, file)
    except ConfigError as exc:
        from .confighints import toml_line

        line = toml_line(text, exc.path) if exc.path else None
        if line is None:
            raise
        raise ConfigError(str(exc).replace(f"{file}: ", f"{file}:{line}: ", 1), exc.path) from None
    return data
