"""The environment of the processes the agent starts for the model (``run_command``):
the agent's own, without its secrets.

Removed: every provider family's key variables (and any configured ``api-key-env``),
any variable whose name ends in ``_API_KEY`` or ``_AUTH_TOKEN``, and any variable holding
a key ``acp-agent login`` stored (whatever its name), unless listed in the configuration's
``keep-env``. MCP servers get the MCP SDK's minimal environment plus what
the editor configured, and the editor's own terminals its environment: neither inherits
the agent's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..config import Config

SECRET_SUFFIXES = ("_API_KEY", "_AUTH_TOKEN")


def secret_names(config: Config) -> set[str]:
    """The variables that hold the agent's model credentials."""
    from ..providers.registry import FAMILIES, spec

    names: set[str] = set()
    for family in FAMILIES:
        names.update(spec(family).key_envs)
    names.update(s.api_key_env for s in config.providers.values() if s.api_key_env)
    return names


def child_environ(config: Config, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    from ..providers.credentials import secrets

    secret = secret_names(config)
    stored = secrets(environ)
    keep = set(config.keep_env)
    return {
        name: value
        for name, value in environ.items()
        if name in keep
        or not (name in secret or name.upper().endswith(SECRET_SUFFIXES) or value in stored)
    }
