"""Everything a person typed, checked before the agent starts: each mistake is one line
that says what is wrong and how to put it right (``UserError``), never a traceback."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..config import default_state_dir
from ..providers.registry import endpoint, missing_key, spec
from .reach import model_url

if TYPE_CHECKING:
    from ..config import Config
    from .client import Policy


class UserError(Exception):
    """A mistake in what was typed (flags, environment, files); the message says it."""


@dataclass
class Options:
    command: str
    prompt: str | None
    cwd: str
    policy: Policy
    save: bool
    json: bool
    debug: bool
    model: str
    resume: str | None = None
    """``chat --continue`` / ``--resume [ID]`` (see ``resume``)."""
    state_dir: str = ""
    """Where the chat's history is kept (the agent's state directory)."""
    state_flag: str | None = None
    """``--state-dir`` as given: the resume command said at the end repeats it."""
    url: str | None = None
    """Where the model's requests go (``None``: not over the network)."""
    url_source: str = ""
    """Where the model's base URL comes from, for the message when nothing is there."""
    family: str = "offline"


def check(command: str, args: Any, config: Config) -> Options:
    """The human mode's options, every one checked (raises :class:`UserError`)."""
    prompt = args.prompt if command == "run" else None
    if prompt is not None and not prompt.strip():
        raise UserError(f"{command}: the prompt is empty")
    cwd = os.path.abspath(os.path.expanduser(args.cwd or os.getcwd()))
    if not os.path.isdir(cwd):
        what = "is not a directory" if os.path.exists(cwd) else "does not exist"
        raise UserError(f"--cwd {args.cwd}: {cwd} {what}")
    check_model(config, args.base_url)
    if config.log_file:
        try:
            with open(config.log_file, "a"):
                pass
        except OSError as exc:
            raise UserError(f"log file {config.log_file}: {exc.strerror}") from None
    policy: Policy = args.policy or ("ask" if can_ask() else "cannot_ask")
    return Options(
        command=command,
        prompt=prompt,
        cwd=cwd,
        policy=policy,
        save=args.save,
        json=bool(getattr(args, "json", False)),
        debug=args.debug,
        model=config.model,
        resume=getattr(args, "resume", None),
        state_dir=config.state_dir or default_state_dir(),
        state_flag=args.state_dir,
        url=model_url(config),
        url_source=url_source(config, args.base_url),
        family=config.provider,
    )


def can_ask() -> bool:
    """A person can answer: the keyboard is a terminal and so is a screen to ask on."""
    return sys.stdin.isatty() and (sys.stdout.isatty() or sys.stderr.isatty())


def check_model(config: Config, base_url_flag: str | None) -> None:
    """The model can start: its key is set, its endpoint is a URL, its script plays."""
    family = spec(config.provider)
    key = missing_key(config)
    if key is not None:
        local = (
            f", or give --base-url for a local {family.title}-compatible server"
            if family.keyless_with_base_url
            else ""
        )
        raise UserError(
            f"{config.model} needs an API key: run `acp-agent login --provider {family.name}`"
            f" to store one, or set {key} in the environment{local}"
            " (the default model, offline, needs none)"
        )
    if family.remote:
        url = endpoint(config, family.name).base_url
        if url is not None and not _is_url(url):
            source = url_source(config, base_url_flag)
            fix = (
                f"write it with its scheme, e.g. 'http://{url}'"
                if "://" not in url
                else "e.g. 'http://127.0.0.1:8000/v1'"
            )
            raise UserError(f"{source} {url!r} is not an http(s) URL: {fix}")
    if family.name == "offline" and config.offline_script:
        # the offline model's script reader: only when a script is set
        from ..providers._offline import ScriptError, load_script

        source = (
            "ACP_AGENT_OFFLINE_SCRIPT"
            if os.environ.get("ACP_AGENT_OFFLINE_SCRIPT")
            else "offline-script"
        )
        try:
            load_script(config.offline_script)
        except ScriptError as exc:
            raise UserError(f"{source}: {exc}") from None


def _is_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises on a port that is not a number)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def url_source(config: Config, flag: str | None) -> str:
    """Where the model's base URL comes from: the flag, the file, the variable, or the
    family's default."""
    family = spec(config.provider)
    if flag:
        return "--base-url"
    if config.provider_settings(family.name).base_url:
        return f"[{family.name}] base-url"
    if family.base_url_env and os.environ.get(family.base_url_env):
        return family.base_url_env
    return "the default; --base-url sets another"
