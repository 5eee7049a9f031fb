"""``acp-agent doctor``: the set-up checked, one line each: the configuration file and
what is in effect (with where the model comes from), each provider family's key source
(never the key), the base URLs in use reachable or not, the state directory's health
(permissions, free space, the session index), the command sandbox's backend, and the MCP
servers. Status 0 when all is well, 1 when a line says ``FAIL``; ``note`` lines are worth
knowing and no fault."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from typing import TYPE_CHECKING

from ..engine.probe import probe

if TYPE_CHECKING:
    import argparse

    from ..config import Config

OK, NOTE, FAIL = "ok", "note", "FAIL"
MIN_FREE = 100 * 1024 * 1024
"""Less free space than this in the state directory is a failure (sessions are logs)."""


def build_parser() -> argparse.ArgumentParser:
    import argparse

    from .flags import agent_flags

    p = argparse.ArgumentParser(
        prog="acp-agent doctor",
        description="Check the set-up, one line each; status 0 when all is well.",
    )
    agent_flags(p)
    return p


def main(command: str, argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    from .. import __version__
    from .. import config as config_mod
    from .flags import load_config

    python = sys.version.split()[0]
    lines: list[tuple[str, str]] = [(OK, f"acp-agent {__version__}, Python {python}")]
    try:
        config = load_config(args)
    except config_mod.ConfigError as exc:
        lines.append((FAIL, f"configuration: {exc}"))
        return report(lines)
    lines += configuration(config, args)
    lines += keys(config)
    lines += asyncio.run(servers(config))
    lines += state(config.state_dir or config_mod.default_state_dir())
    lines.append(sandbox())
    lines.append((OK, "MCP servers: none configured here; editors give theirs with each session"))
    return report(lines)


def report(lines: list[tuple[str, str]]) -> int:
    for status, text in lines:
        sys.stdout.write(f"{status:<4}  {text}\n")
    return 1 if any(status == FAIL for status, _ in lines) else 0


def configuration(config: Config, args: argparse.Namespace) -> list[tuple[str, str]]:
    from ..config import ENV_VARS, default_config_path

    file = args.config or default_config_path()
    found = os.path.isfile(file)
    out = [(OK, f"configuration file: {file}" + ("" if found else " (none: defaults)")
            + "; precedence: flags > environment (ACP_AGENT_*) > file > defaults")]  # fmt: skip
    if args.model:
        source = "--model"
    elif os.environ.get("ACP_AGENT_MODEL"):
        source = "ACP_AGENT_MODEL"
    elif found and _file_sets(file, "model"):
        source = file
    else:
        source = "the default"
    out.append((OK, f"model: {config.model} (from {source}); mode: {config.default_mode}"))
    used = [name for name in ENV_VARS if os.environ.get(name)]
    if used:
        out.append((OK, f"environment: {', '.join(used)} set"))
    return out


def _file_sets(file: str, key: str) -> bool:
    import tomllib

    try:
        with open(file, "rb") as fh:
            return key in tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError):
        return False


def families_in_use(config: Config) -> list[str]:
    """The families of the configured model and of ``models``, in that order."""
    return list(dict.fromkeys(m.partition(":")[0] for m in (config.model, *config.models)))


def keys(config: Config) -> list[tuple[str, str]]:
    """Where each keyed family's key comes from; a missing one fails only if in use."""
    from ..providers.registry import FAMILIES, HEADERS, STORED, key_source, missing_key, spec

    used = families_in_use(config)
    out: list[tuple[str, str]] = []
    for family in FAMILIES:
        s = spec(family)
        if not s.key_envs:
            continue
        source = key_source(config, family)
        if source is not None:
            where = {HEADERS: f"the [{family}] headers", STORED: "stored by acp-agent login"}
            out.append((OK, f"{s.title} key: {where.get(source, source)}"))
            continue
        model = next((m for m in (config.model, *config.models) if m.startswith(family + ":")),
                     None)  # fmt: skip
        needed = missing_key(config, model) if model else s.key_envs[0]
        if model is not None and needed is None:  # a local server by base URL
            out.append((OK, f"{s.title} key: none needed (a base URL is set)"))
            continue
        fix = f"acp-agent login --provider {family}, or set {s.key_envs[0]}"
        status = FAIL if family in used else NOTE
        out.append((status, f"{s.title} key: none ({fix})"))
    return out


async def servers(config: Config) -> list[tuple[str, str]]:
    """Each remote family in use: its base URL, and whether a connection opens."""
    from ..human.reach import fatal, probe
    from ..providers.registry import endpoint, spec

    out: list[tuple[str, str]] = []
    for family in families_in_use(config):
        s = spec(family)
        if not s.remote:
            continue
        url = endpoint(config, family).base_url or s.sdk_base_url or "?"
        why = await probe(url)
        if why is None:
            out.append((OK, f"{s.title} at {url}: reachable"))
        else:
            hint = f" ({s.unreachable_hint})" if s.unreachable_hint and fatal(why) else ""
            out.append((FAIL, f"{s.title} at {url}: {why}{hint}"))
    return out


def state(state_dir: str) -> list[tuple[str, str]]:
    """The state directory: there (or creatable), private, room left, index readable."""
    if not os.path.isdir(state_dir):
        parent = next((p for p in _parents(state_dir) if os.path.isdir(p)), "/")
        if os.access(parent, os.W_OK):
            return [(OK, f"state directory: {state_dir} (created when first needed)")]
        return [(FAIL, f"state directory: {state_dir} cannot be created ({parent} is not"
                       " writable; --state-dir or ACP_AGENT_STATE_DIR)")]  # fmt: skip
    out: list[tuple[str, str]] = []
    mode = os.stat(state_dir).st_mode & 0o777
    writable = os.access(state_dir, os.W_OK)
    free = shutil.disk_usage(state_dir).free
    status = FAIL if not writable or free < MIN_FREE else NOTE if mode & 0o077 else OK
    private = "private" if not mode & 0o077 else f"mode {mode:o}: others can read it"
    can = "writable" if writable else "NOT writable"
    out.append((status, f"state directory: {state_dir} ({can}, {private},"
                        f" {free / 1e9:.1f} GB free)"))  # fmt: skip
    out.append(index(state_dir))
    return out


def _parents(path: str) -> list[str]:
    out: list[str] = []
    while True:
        parent = os.path.dirname(path)
        if parent == path:
            return out
        out.append(parent)
        path = parent


def index(state_dir: str) -> tuple[str, str]:
    from .sessions import listing, open_store

    store = open_store(state_dir)
    try:
        count = len(listing(store, None))
    except Exception as exc:  # a torn index is rebuilt; anything left is worth saying
        return FAIL, f"session index: {type(exc).__name__}: {exc}"
    finally:
        store.writer.close()
    return OK, f"sessions: {count} saved, index readable"


def sandbox() -> tuple[str, str]:
    """The command sandbox's backend: bubblewrap, if it is installed and runs here (the
    probe the agent itself runs: ``engine.probe``)."""
    found = probe()
    if found.program is not None:
        return OK, f"sandbox: bubblewrap ({found.program}): `auto` mode is offered"
    return NOTE, f"sandbox: none ({found.why_not}); `auto` mode is not offered"
