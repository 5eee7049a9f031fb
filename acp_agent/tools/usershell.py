"""The shell commands run in: the user's, truthfully named.

Which shell (:func:`user_shell`, chosen once per process from the agent's environment):
``$SHELL`` when it is bash or zsh (what people write commands for: ``[[``, ``&>``,
``source``, brace expansion), else bash when there is one, else ``/bin/sh``. A command
runs as ``<shell> -c <command>``: not interactive, not a login shell.

The login environment (:func:`login_environment`) is read once per session, by running
``<shell> -l`` once (bash: ``/etc/profile`` and ``~/.bash_profile`` or ``~/.profile``;
zsh: ``.zshenv``, ``.zprofile``, ``.zlogin``) and asking it for its environment; the
session's commands then run with it (after the same secret filter as the agent's own
environment: ``engine.childenv``). Why once and not a login shell per command: a
profile often takes hundreds of milliseconds (nvm, pyenv, conda), may print, and may
``export`` the very keys the filter removed; read once, it costs one start per session
and the filter sees what the profile set. ``PATH`` entries a profile adds (nvm, pyenv,
cargo) are there; what only interactive shells set up (``.bashrc`` behind an
interactive guard, aliases) is not.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass

#: Seconds a login shell may take to say its environment.
LOGIN_TIMEOUT = 10.0
_MARK = "\x00acp-agent-login-env\x00"
#: Run by the login shell: our interpreter writes the environment it was given (told not
#: to add LC_CTYPE of its own: PEP 538).
_DUMP = ("import json,os,sys;e=dict(os.environ);e.pop('PYTHONCOERCECLOCALE',None);"
         f"sys.stdout.write({_MARK!r}+json.dumps(e))")  # fmt: skip


@dataclass(frozen=True, slots=True)
class Shell:
    path: str
    name: str
    """``bash``, ``zsh`` or ``sh``."""
    why: str
    """Why this one, in words for the environment section."""

    def argv(self, command: str) -> list[str]:
        """The command line a command runs as."""
        return [self.path, "-c", command]


def choose(env: Mapping[str, str]) -> Shell:
    """The shell for an environment (see the module's docstring)."""
    given = env.get("SHELL", "")
    name = os.path.basename(given)
    if name in ("bash", "zsh") and os.path.isabs(given) and os.access(given, os.X_OK):
        return Shell(given, name, "your $SHELL")
    bash = shutil.which("bash", path=env.get("PATH") or os.defpath)
    why = f"your $SHELL ({given}) is not bash or zsh" if given else "$SHELL is not set"
    if bash is not None:
        return Shell(bash, "bash", why)
    return Shell("/bin/sh", "sh", why + "; bash was not found")


@functools.cache
def user_shell() -> Shell:
    """The shell of this process's commands (from the agent's own environment)."""
    return choose(os.environ)


@dataclass(frozen=True, slots=True)
class LoginEnvironment:
    env: dict[str, str] | None
    """What the login shell exported (``None``: it could not be read)."""
    problem: str = ""
    """Why not, when it could not be read."""


async def login_environment(
    shell: Shell, cwd: str, env: Mapping[str, str], timeout: float = LOGIN_TIMEOUT
) -> LoginEnvironment:
    """Start ``shell`` once as a login shell (in ``cwd``, with ``env``, no input) and read
    the environment it ends up with; a profile that fails, hangs or prints garbage leaves
    ``env`` as it was (``problem`` says why)."""
    if shell.name == "sh":
        return LoginEnvironment(None, "no login shell for /bin/sh")
    script = 'PYTHONCOERCECLOCALE=0 exec "$0" -c "$1"'
    argv = [shell.path, "-l", "-c", script, sys.executable, _DUMP]
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=cwd if os.path.isdir(cwd) else None, env=dict(env),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
    except OSError as exc:
        return LoginEnvironment(None, f"{shell.path} could not start: {exc.strerror or exc}")
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        await proc.wait()
        return LoginEnvironment(None, f"{shell.path} -l took more than {timeout:g} s")
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        with contextlib.suppress(Exception):
            await asyncio.shield(proc.wait())
        raise
    text = out.decode("utf-8", "replace")
    _, found, payload = text.partition(_MARK)
    try:
        values = json.loads(payload) if found else None
    except ValueError:
        values = None
    if not isinstance(values, dict):
        return LoginEnvironment(None, f"{shell.path} -l exited {proc.returncode} without it")
    return LoginEnvironment({str(k): str(v) for k, v in values.items()})
