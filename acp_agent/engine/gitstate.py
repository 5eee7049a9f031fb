"""The git facts of the environment block (branch, clean or not), without running what
the repository configured.

A repository is not trusted: its ``.git/config`` can name programs that git runs on its
own (``core.fsmonitor``, hooks, clean/smudge filters, a pager, an external diff, lazy
fetches of a partial clone through ``ssh``/``ext::`` transports and their helpers).
Opening a session must run none of them. So:

* the branch (or the detached commit) is read from ``HEAD`` directly, following a
  ``.git`` file (``gitdir: ...``) as worktrees and submodules have; no git is run;
* "clean or not" needs git (``git status``), run with every repository-configured
  program disabled: ``--no-optional-locks`` (the index is not rewritten, so no
  ``post-index-change`` hook), ``core.fsmonitor=false``, ``core.hooksPath=/dev/null``,
  ``core.pager=cat``, ``diff.external`` empty, each filter driver the configuration
  names (read with ``git config``, which runs nothing) emptied and not required,
  submodules ignored (git is not run in them), and no transport allowed
  (``GIT_ALLOW_PROTOCOL``, so a partial clone fetches nothing); ``git`` is found on the
  absolute entries of ``PATH`` only (never a ``./git`` of the project), its input is
  empty and it gets the environment commands get (no secrets: ``childenv``). Aliases do
  not apply to ``status`` and ``config`` (built-ins), and credential helpers and askpass
  programs only to transports, which are refused. A repository whose configuration this
  cannot neutralise (a filter name git cannot take on its command line) is described
  without its state.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping

TIMEOUT = 5.0

#: Settings that stop ``git status`` from running anything the repository configured.
SAFE_CONFIG = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "diff.external=",
    "core.untrackedCache=false",
    "protocol.allow=never",
)
SAFE_ENV = {
    "GIT_ALLOW_PROTOCOL": "none",  # no transport at all (overrides protocol.*.allow)
    "GIT_NO_LAZY_FETCH": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
}


def repo_root(cwd: str) -> str | None:
    """The nearest directory from ``cwd`` up holding a ``.git`` (directory or file)."""
    here = os.path.abspath(cwd)
    while True:
        if os.path.lexists(os.path.join(here, ".git")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def git_dir(root: str) -> str | None:
    """The repository's git directory: ``root/.git``, or where a ``.git`` file points."""
    dot = os.path.join(root, ".git")
    if os.path.isdir(dot):
        return dot
    try:
        with open(dot, encoding="utf-8", errors="replace") as fh:
            first = fh.readline(4096).strip()
    except OSError:
        return None
    if not first.startswith("gitdir:"):
        return None
    target = first[len("gitdir:") :].strip()
    return os.path.normpath(os.path.join(root, target))


def branch(root: str) -> str | None:
    """``"branch main"`` or ``"a detached HEAD at 1a2b3c4"`` from ``HEAD``; ``None`` when
    it cannot be read."""
    where = git_dir(root)
    if where is None:
        return None
    try:
        with open(os.path.join(where, "HEAD"), encoding="utf-8", errors="replace") as fh:
            head = fh.read(1024).strip()
    except OSError:
        return None
    if head.startswith("ref:"):
        ref = head[len("ref:") :].strip()
        return "branch " + ref.removeprefix("refs/heads/")
    if len(head) >= 7 and all(c in "0123456789abcdef" for c in head):
        return f"a detached HEAD at {head[:7]}"
    return None


def _git_program(env: Mapping[str, str]) -> str | None:
    entries = env.get("PATH", os.defpath).split(os.pathsep)
    return shutil.which("git", path=os.pathsep.join(p for p in entries if os.path.isabs(p)))


def _run(git: str, args: list[str], cwd: str, env: Mapping[str, str]) -> str:
    out = subprocess.run(
        [git, "--no-pager", "--no-optional-locks", *args], cwd=cwd, env={**env, **SAFE_ENV},
        stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace",
        timeout=TIMEOUT, check=True,
    )  # fmt: skip
    return out.stdout


def _filter_overrides(git: str, cwd: str, env: Mapping[str, str]) -> list[str] | None:
    """``-c`` settings that empty every filter driver configured (``None``: a driver
    name git's ``-c`` cannot express)."""
    try:
        names = _run(git, ["config", "-z", "--name-only", "--get-regexp", r"^filter\."], cwd, env)
    except subprocess.CalledProcessError as exc:
        if exc.returncode == 1:  # no such setting
            return []
        raise
    drivers = {name[len("filter.") : name.rfind(".")] for name in names.split("\0") if name}
    if any("=" in d or not d for d in drivers):
        return None
    out: list[str] = []
    for driver in sorted(drivers):
        for key, value in (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false")):
            out += ["-c", f"filter.{driver}.{key}={value}"]
    return out


def state(root: str, cwd: str, env: Mapping[str, str]) -> str:
    """The environment block's words for the repository at ``root`` (``cwd`` inside)."""
    on = branch(root)
    if on is None:
        return "a git repository (its state could not be read)"
    git = _git_program(env)
    if git is None:
        return f"a repository on {on} (git is not installed: its state is unknown)"
    try:
        filters = _filter_overrides(git, cwd, env)
        if filters is None:
            return f"a repository on {on} (its state is not read: its filters cannot be disabled)"
        safe = [arg for setting in SAFE_CONFIG for arg in ("-c", setting)]
        args = [*safe, *filters, "status", "--porcelain", "--ignore-submodules=all"]
        changes = len(_run(git, args, cwd, env).splitlines())
    except (OSError, subprocess.SubprocessError):
        return f"a repository on {on} (its state could not be read)"
    clean = "clean" if not changes else f"{changes} uncommitted change(s)"
    return f"a repository on {on}, {clean} at the start of the session"
