"""The environment of the programs the agent starts: the agent's own, without its secrets.

Every child gets it: the commands the model runs (``run_command``, a subagent's too, and
sandboxed or not) and the ``git status`` of the environment block. The stdio MCP servers
the agent starts get a small base of it (``mcp.base_env``: ``PATH``, ``HOME``, locale,
proxies, certificates) through the same filter, then what the editor configured for each.
Removed, unless listed in the configuration's ``keep-env``:

* every provider family's key variables, and any configured ``api-key-env``;
* any variable whose name looks like a secret (case-insensitive): ``*_API_KEY``,
  ``*_TOKEN``, ``*_SECRET``, ``*_SECRET_*``, ``*SECRET_ACCESS_KEY``, ``*_PASSWORD``,
  ``*_PASSWD``, ``*_CREDENTIALS``, ``*_PRIVATE_KEY`` (:data:`SECRET_PATTERNS`);
* any variable holding a key ``acp-agent login`` stored, or the value of a provider key
  variable (of :data:`MIN_KEY` characters or more), whatever its name.

The editor's own terminals get the editor's environment: the agent does not choose it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from ..config import Config
from ..providers.credentials import secrets
from ..providers.registry import FAMILIES, spec

#: Names that look like secrets (``fnmatch`` patterns, matched case-insensitively).
SECRET_PATTERNS = (
    "*_API_KEY", "*_TOKEN", "*_SECRET", "*_SECRET_*", "*SECRET_ACCESS_KEY", "*_PASSWORD",
    "*_PASSWD", "*_CREDENTIALS", "*_PRIVATE_KEY",
)  # fmt: skip
_SECRET_NAME = re.compile(
    "|".join(
        ".*".join(re.escape(part) for part in pattern.split("*")) for pattern in SECRET_PATTERNS
    ),
    re.IGNORECASE,
)


#: A provider key variable's value this long or longer is looked for in other variables.
MIN_KEY = 8


def looks_secret(name: str) -> bool:
    """Whether a variable's name matches one of :data:`SECRET_PATTERNS`."""
    return _SECRET_NAME.fullmatch(name) is not None


def secret_names(config: Config) -> set[str]:
    """The variables that hold the agent's model credentials."""
    names: set[str] = set()
    for family in FAMILIES:
        names.update(spec(family).key_envs)
    names.update(s.api_key_env for s in config.providers.values() if s.api_key_env)
    return names


def child_environ(config: Config, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    secret = secret_names(config)
    values = set(secrets(environ))
    values.update(v for name, v in environ.items() if name in secret and len(v) >= MIN_KEY)
    keep = set(config.keep_env)
    return {
        name: value
        for name, value in environ.items()
        if name in keep or not (name in secret or looks_secret(name) or value in values)
    }
