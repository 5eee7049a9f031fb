"""Configuration: defaults < TOML file < environment < command-line flags.

The file format is the one documented in ``config.example.toml``. Unknown keys and
wrong types are errors that name the key (``ConfigError``). Secrets are never stored
here: the file names the environment variable that holds a key (``api_key_env``).
"""

# Annotations as objects, not text (no ``from __future__ import annotations``): msgspec
# builds its plan for the configuration at start, and would compile each text first.
import os
from collections.abc import Callable, Mapping
from typing import Any, Literal

import msgspec

from .hints import shape_problem, toml_line, unknown_variable

LogLevel = Literal["debug", "info", "warning", "error", "critical"]
ModeId = Literal["ask", "accept-edits", "auto", "plan", "bypass"]
SandboxLevel = Literal["read-only", "workspace-write", "off"]


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
    tool_style: Literal["standard", "codex"] | None = None
    """The model's tool set (``providers.models.ModelInfo.tool_style``)."""


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
    web_timeout: float = 30.0
    web_max_bytes: int = 5_000_000
    web_max_chars: int = 50_000


class Web(_Section, frozen=True):
    enabled: bool = True
    """Offer web_fetch to the model."""
    allow_private: bool = False
    """Let web_fetch reach private, loopback and link-local addresses."""


class SandboxSettings(_Section, frozen=True):
    """``[sandbox]``: how commands are fenced (see ``sandboxing`` and ``tools.sandbox``)."""

    level: SandboxLevel = "workspace-write"
    """The level ``auto`` mode runs commands at without asking (the ``sandbox`` session
    option's default; ``--sandbox``)."""
    approved: SandboxLevel = "off"
    """The level commands approved in ``ask`` and ``accept-edits`` run at."""
    backend: Literal["auto", "bubblewrap"] = "auto"
    network: bool = False
    writable: list[str] = []
    """More writable places at ``workspace-write`` (each must exist)."""
    hide: list[str] = []
    """Places sandboxed commands see empty (besides the state and credentials)."""
    git_writable: bool = False
    """The ``.git`` directories of the roots writable at ``workspace-write``."""


class Checkpoints(_Section, frozen=True):
    """``[checkpoints]``: what ``/undo`` and ``/rewind`` can put back (``engine.checkpoints``)."""

    enabled: bool = True
    max_size: int = 256 * 1024 * 1024
    """Bytes of a session's checkpoints (copies and snapshot); past it, the oldest go."""
    max_file_size: int = 1024 * 1024
    """A larger file is known by its hash only (reported as not restorable)."""
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
    web: Web = Web()
    offline_script: str | None = None
    keep_env: list[str] = []
    """Variables passed to commands although they look like secrets (see ``childenv``)."""
    sandbox: SandboxSettings = SandboxSettings()

    @property
    def provider(self) -> str:
        """The configured model's family (``openai`` of ``openai:gpt-4.1``)."""
        return self.model.split(":", 1)[0]

    def provider_settings(self, family: str) -> ProviderSettings:
        return self.providers.get(family) or _NO_SETTINGS


def sandbox_needs(config: Config) -> list[str]:
    """What in the configuration needs a working sandbox (empty: nothing does), in words:
    checked at start, so that a missing one is an error there, never a silent downgrade."""
    settings = config.sandbox
    needed = []
    if config.default_mode == "auto":
        needed.append("`--mode auto` (default-mode) runs commands in a sandbox")
    if settings.backend != "auto":
        needed.append(f"`sandbox.backend` is {settings.backend!r}")
    if settings.approved != "off":
        needed.append(f"`sandbox.approved` is {settings.approved!r}")
    return needed


_NO_SETTINGS = ProviderSettings()
SETTINGS = frozenset(f.encode_name for f in msgspec.structs.fields(Config))
"""The top-level keys of the configuration (a provider section is any other table)."""

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
    """A validated configuration from the file's structure (kebab-case keys). A
    :class:`ConfigError` says ``source: <what is wrong>`` and carries the key's path.
    Top-level tables that are not settings of their own are provider sections
    (``[openai]``); which families exist is the provider registry's to say (``check``)."""
    given = {k: v for k, v in raw.items() if k not in SETTINGS and isinstance(v, Mapping)}
    sections: dict[str, type[Any]] = {"limits": Limits, **dict.fromkeys(given, ProviderSettings)}
    problem = shape_problem(
        raw, Config, sections, {"model-overrides": ModelOverride, "providers": ProviderSettings}
    )
    if problem is not None:
        path, text = problem
        raise ConfigError(f"{source}: {text}", path)
    if given:  # the file's [<family>] sections are the config's `providers`
        rest = {k: v for k, v in raw.items() if k not in given}
        nested = rest.get("providers")
        raw = {**rest, "providers": {**(nested if isinstance(nested, Mapping) else {}),
                                     **given}}  # fmt: skip
    try:
        config = msgspec.convert(raw, Config, str_keys=True)
    except msgspec.ValidationError as exc:  # what shape_problem did not foresee
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
    if limits.web_timeout <= 0:
        raise bad_limit("web-timeout", "positive")
    if limits.web_max_bytes < 1:
        raise bad_limit("web-max-bytes", "positive")
    if limits.web_max_chars < 1:
        raise bad_limit("web-max-chars", "positive")
    if limits.max_message_bytes < 1024:
        raise bad_limit("max-message-bytes", "at least 1024")
    for name in ("max_size", "max_file_size"):
        if getattr(config.checkpoints, name) < 0:
            key = name.replace("_", "-")
            raise ConfigError(
                f"{source}: `checkpoints.{key}` must not be negative", ("checkpoints", key)
            )
    for key, places in (("writable", config.sandbox.writable), ("hide", config.sandbox.hide)):
        for place in places:
            full = os.path.expanduser(place)
            if not os.path.isabs(full):
                raise ConfigError(
                    f"{source}: `sandbox.{key}`: {place!r} is not an absolute path",
                    ("sandbox", key),
                )
            if key == "writable" and not os.path.exists(full):
                raise ConfigError(
                    f"{source}: `sandbox.writable`: {place!r} does not exist",
                    ("sandbox", key),
                )


def load(
    path: str | None = None,
    env: Mapping[str, str] = os.environ,
    overrides: Mapping[str, Any] | None = None,
    check: Check | None = None,
) -> Config:
    """Build the configuration. ``path=None`` reads the user config file if it exists;
    ``overrides`` holds command-line values (kebab-case keys, nested dicts). A mistake is
    named where it was made: the file and line, or the variable."""
    merged: dict[str, Any] = {}
    file = path or default_config_path(env)
    if path or os.path.isfile(file):
        merged = _read_file(file, check)
    unknown = unknown_variable(env, ENV_VARS)
    if unknown is not None:
        raise ConfigError(unknown)
    env_values = {key: env[name] for name, key in ENV_VARS.items() if env.get(name)}
    for name, key in ENV_VARS.items():
        if env.get(name):
            from_mapping({key: env[name]}, name, check)  # each variable named in its own error
    if env_values:
        from_mapping(_merge(merged, env_values), "environment", check)
        merged = _merge(merged, env_values)
    if overrides:
        merged = _merge(merged, overrides)
    return from_mapping(merged, "command line" if overrides else "config", check)


def _read_file(file: str, check: Check | None) -> dict[str, Any]:
    """The file's settings, checked: an error says ``file:line: ...``."""
    import tomllib  # only when there is a file: most editors start the agent without one

    try:
        with open(file, "rb") as fh:
            text = fh.read().decode("utf-8", "replace")
        data = tomllib.loads(text)
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: invalid TOML: {exc}") from None
    try:
        from_mapping(data, file, check)
    except ConfigError as exc:
        line = toml_line(text, exc.path) if exc.path else None
        if line is None:
            raise
        raise ConfigError(str(exc).replace(f"{file}: ", f"{file}:{line}: ", 1), exc.path) from None
    return data
