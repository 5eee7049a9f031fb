"""``acp-agent permissions``: the "always" answers remembered for this project (``--all``:
for every project), numbered, each in the words its option used; ``acp-agent permissions
forget N...`` (or a rule as listed, or ``--all``) takes them back. Agents running in the
project read the file again before a remembered answer decides, so a rule forgotten here
no longer counts there either. ``/permissions`` in a chat does the same."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse


def build_parser() -> argparse.ArgumentParser:
    import argparse

    from .flags import agent_flags

    p = argparse.ArgumentParser(
        prog="acp-agent permissions",
        description="List the \"always\" answers remembered for this project, or forget them.",
        usage="acp-agent permissions [--all] [--cwd DIR]\n"
        "       acp-agent permissions forget (N... | RULE | --all) [--cwd DIR]",
        epilog="A rule covers exactly what its option said: a command as approved (in its"
        " directory), edits or reads in a directory and below, one MCP tool.",
    )
    p.add_argument("words", nargs="*", metavar="forget N", help=argparse.SUPPRESS)
    p.add_argument("--all", action="store_true",
                   help="list every project's rules; with forget: all of this project's")
    p.add_argument("--cwd", default=None, help="the project's directory (default: current)")
    agent_flags(p, shown=("--state-dir", "--config"))
    return p


def main(command: str, argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from .. import config as config_mod
    from ..engine.permissions import read_rules, rules_path
    from .flags import load_config

    try:
        config = load_config(args)
    except config_mod.ConfigError as exc:
        return _fail(str(exc))
    state_dir = config.state_dir or config_mod.default_state_dir()
    cwd = os.path.realpath(args.cwd or os.getcwd())
    if args.words and args.words[0] == "forget":
        return forget(rules_path(state_dir, cwd), cwd, args.words[1:], every=args.all)
    if args.words:
        return _fail(f"permissions: unknown action {args.words[0]!r} (forget, or nothing to list)")
    if args.all:
        return show_all(state_dir)
    rules = read_rules(rules_path(state_dir, cwd))
    return show(rules.path, rules.project or cwd, rules.allow, rules.reject)


def show(path: str, project: str, allow: list[str], reject: list[str]) -> int:
    from ..engine.permissions import listing, numbered

    rows = numbered(allow, reject)
    if not rows:
        sys.stderr.write(f"no remembered answers for {project}: every call that asks, asks\n")
        return 0
    sys.stdout.write(f"{project}\n" + "".join(f"{line}\n" for line in listing(rows, project)))
    sys.stderr.write("acp-agent permissions forget N (or --all) takes them back\n")
    return 0


def show_all(state_dir: str) -> int:
    from ..engine.permissions import all_rules, listing, numbered

    every = all_rules(state_dir)
    if not every:
        sys.stderr.write("no remembered answers in any project\n")
        return 0
    for rules in every:
        name = rules.project or f"(a project not named in {rules.path})"
        rows = numbered(rules.allow, rules.reject)
        sys.stdout.write(f"{name}\n" + "".join(f"{line}\n" for line in listing(rows, name)))
    sys.stderr.write("forget one project's: acp-agent permissions forget N --cwd DIR\n")
    return 0


def forget(path: str, cwd: str, words: list[str], *, every: bool) -> int:
    from ..engine.permissions import chosen, forget_rules, numbered, read_rules

    rules = read_rules(path)
    project = rules.project or cwd
    rows = numbered(rules.allow, rules.reject)
    if not words and not every:
        return _fail("permissions forget: which? a number from the list, a rule as listed,"
                     " or --all")  # fmt: skip
    if not rows:
        return _fail(f"permissions forget: no remembered answers for {project}")
    try:
        keys = chosen(rows, ["all"] if every else words, project)
    except ValueError as exc:
        return _fail(f"permissions forget: {exc}")
    try:
        forget_rules(path, keys)
    except OSError as exc:
        return _fail(f"permissions forget: {path}: {exc.strerror}", 1)
    sys.stderr.write(f"forgot {len(keys)} rule{'s' * (len(keys) != 1)} of {project}:"
                     " such calls ask again\n")  # fmt: skip
    return 0


def _fail(text: str, code: int = 2) -> int:
    sys.stderr.write(f"acp-agent: {text}\n")
    return code
