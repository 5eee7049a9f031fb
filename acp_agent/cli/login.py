"""``acp-agent login`` and ``acp-agent logout``: store, or forget, a provider's API key.

::

    acp-agent [agent flags] login [--provider FAMILY] [--key-from-stdin] [--store WHERE]
    acp-agent [agent flags] logout [--provider FAMILY]

An editor's terminal authentication runs the agent's configured command with ``login``
appended, in a terminal: the key of the configured model's provider (or of the one the
user picks) is asked for without echo, and stored by ``providers.credentials`` (a file
readable only by the user, or the system keyring). ``--key-from-stdin`` reads it from
standard input instead, for scripts. Everything is said on stderr; the key never is.

Exit status: 0 once stored (or forgotten), 1 when the key or the store is refused, 2 on
bad usage, 130 when interrupted.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from .flags import agent_flags

if TYPE_CHECKING:
    import argparse

    from ..config import Config

MAX_KEY = 4096


def build_parser(command: str) -> argparse.ArgumentParser:
    import argparse

    p = argparse.ArgumentParser(
        prog=f"acp-agent {command}",
        description="Store a provider's API key for the agent (asked without echo)."
        if command == "login"
        else "Forget the API keys `acp-agent login` stored.",
        epilog="The environment wins: a key variable that is set is used instead of a stored"
        " key.",
    )
    p.add_argument(
        "--provider",
        choices=_keyed(),
        help="whose key (default: the configured model's provider, else asked)"
        if command == "login"
        else "whose key (default: every stored one)",
    )
    if command == "login":
        p.add_argument(
            "--key-from-stdin",
            action="store_true",
            help="read the key from standard input (no prompt)",
        )
        p.add_argument(
            "--store",
            choices=["auto", "file", "keyring"],
            default="auto",
            help="the system keyring (needs the `keyring` package) or a file readable only"
            " by you (default: auto, the keyring when it works)",
        )
    # the editor's configured flags come along with its login command: accepted, and only
    # those that matter here shown
    agent_flags(p, shown=("--model", "--config"))
    return p


def main(command: str, argv: list[str]) -> int:
    from .. import config as config_mod
    from ..providers import check

    args = build_parser(command).parse_args(argv)
    overrides = {"model": args.model} if args.model else None
    try:
        config = config_mod.load(args.config, overrides=overrides, check=check)
    except config_mod.ConfigError as exc:
        return _fail(f"acp-agent: {exc}", 2)
    try:
        if command == "logout":
            return _logout(args.provider)
        return _login(args, config)
    except KeyboardInterrupt:
        return _fail("\nCancelled: nothing stored.", 130)


def _login(args: argparse.Namespace, config: Config) -> int:
    from ..providers.credentials import CredentialsError, save
    from ..providers.registry import key_names, spec

    interactive = not args.key_from_stdin
    if interactive and not sys.stdin.isatty():
        return _fail("acp-agent login: standard input is not a terminal: pipe the key in"
                     " with --key-from-stdin", 2)  # fmt: skip
    family = args.provider
    if family is None and spec(config.provider).key_envs:
        family = config.provider
    if family is None:
        if not interactive:
            return _fail(f"acp-agent login: {config.model} takes no key: name the provider"
                         " with --provider", 2)  # fmt: skip
        family = _choose(_keyed())
    s = spec(family)
    if interactive:
        for_model = f" for {config.model}" if family == config.provider else ""
        _say(f"Sign in to {s.title}{for_model}: paste your API key and press Enter.")
        try:
            key = _read_secret(f"{s.title} API key (not shown): ")
        except EOFError:
            return _fail("No key entered: nothing stored.", 1)
    else:
        key = sys.stdin.readline()
    key = key.strip()
    problem = _problem(key)
    if problem is not None:
        return _fail(f"acp-agent login: {problem}: nothing stored.", 1)
    try:
        where = save(family, key, args.store)
    except CredentialsError as exc:
        return _fail(f"acp-agent login: {exc}", 1)
    _say(f"Stored the {s.title} API key in {where}.")
    shadowing = [name for name in key_names(s, config) if os.environ.get(name)]
    if shadowing:
        _say(f"Note: {shadowing[0]} is set in this environment; the agent uses it instead.")
    return 0


def _logout(provider: str | None) -> int:
    from ..providers.credentials import CredentialsError, remove
    from ..providers.registry import spec

    try:
        removed = remove(provider)
    except CredentialsError as exc:
        return _fail(f"acp-agent logout: {exc}", 1)
    if removed:
        _say(f"Forgot the stored API key of {', '.join(spec(f).title for f in removed)}.")
    else:
        _say("No API key was stored" + (f" for {spec(provider).title}." if provider else "."))
    return 0


def _keyed() -> list[str]:
    """The families that take a key."""
    from ..providers.registry import FAMILIES, spec

    return [f for f in FAMILIES if spec(f).key_envs]


def _choose(families: list[str]) -> str:
    from ..providers.registry import spec

    _say("Which provider's API key?")
    for i, family in enumerate(families, 1):
        _say(f"  {i}) {spec(family).title} ({spec(family).key_envs[0]})")
    while True:
        _say("Choice [1]: ", end="")
        line = sys.stdin.readline()
        if not line:
            raise KeyboardInterrupt
        answer = line.strip() or "1"
        if answer.isdigit() and 1 <= int(answer) <= len(families):
            return families[int(answer) - 1]
        if answer in families:
            return answer
        _say(f"Type a number from 1 to {len(families)}.")


def _read_secret(prompt: str) -> str:
    """A line from the terminal on stdin, not echoed (echo is off before the prompt)."""
    try:
        import termios
    except ImportError:  # Windows
        import getpass

        return getpass.getpass(prompt, stream=sys.stderr)
    fd = sys.stdin.fileno()
    old = termios.tcgetattr(fd)
    quiet = termios.tcgetattr(fd)
    quiet[3] &= ~termios.ECHO
    termios.tcsetattr(fd, termios.TCSADRAIN, quiet)
    try:
        _say(prompt, end="")
        line = sys.stdin.readline()
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, old)
        _say("")
    if not line:
        raise EOFError
    return line


def _problem(key: str) -> str | None:
    if not key:
        return "no key given"
    if len(key) > MAX_KEY:
        return f"that is longer than any API key ({len(key)} characters)"
    if any(c.isspace() or not c.isprintable() for c in key):
        return "an API key is one word of printable characters"
    return None


def _say(text: str, end: str = "\n") -> None:
    sys.stderr.write(text + end)
    sys.stderr.flush()


def _fail(text: str, code: int) -> int:
    _say(text)
    return code
