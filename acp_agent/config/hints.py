"""Configuration mistakes in words: which key (and where it was written), what is allowed,
and the nearest name when a key or an ``ACP_AGENT_*`` variable is unknown.

:func:`shape_problem` checks the file's structure section by section, so a problem in
``[openai]`` is named ``[openai] base_url`` rather than by msgspec's internal path, and
says what the value should be (the allowed values of a choice, the type of a number).
:func:`toml_line` finds the line a key is written on; :func:`unknown_variable` finds an
``ACP_AGENT_*`` variable that is no setting, with the one it was probably meant to be.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

Path = tuple[str, ...]
"""A key's place: ``("default-mode",)``, ``("openai", "base-url")``."""

KNOWN_VARIABLES: set[str] = {"ACP_AGENT_COALESCE_CHUNKS", "ACP_AGENT_SERVE_TOKEN"}
"""``ACP_AGENT_*`` variables read outside the configuration (beside ``config.ENV_VARS``);
a module that reads another one adds it here."""

# Patterns as text, compiled (and kept) by ``re`` on first use: only an error needs them,
# and start-up loads this module.
_AT = r"(?s)^(?P<what>.*?)(?: - at `\$(?P<path>[^`]*)`)?$"
_UNKNOWN = r"Object contains unknown field `(?P<key>[^`]*)`"
_TYPES = {"int": "a whole number", "float": "a number", "str": "a string", "bool": "true or false",
          "array": "a list", "object": "a table"}  # fmt: skip


def suggest(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate ``name`` was most likely meant to be (spelling, ``_`` for ``-``)."""
    pool = list(candidates)
    normal = {c.replace("_", "-").lower(): c for c in pool}
    key = name.replace("_", "-").lower()
    if key in normal:
        return normal[key]
    words = set(key.split("-"))
    wider = [c for k, c in normal.items() if words < set(k.split("-"))]
    if len(wider) == 1:  # ACP_AGENT_MODE: ACP_AGENT_DEFAULT_MODE, not ACP_AGENT_MODEL
        return wider[0]
    import difflib  # only for a mistake: off the way to `initialize`

    close = difflib.get_close_matches(key, list(normal), n=1, cutoff=0.6)
    return normal[close[0]] if close else None


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    found = suggest(name, candidates)
    return f"; did you mean `{found}`?" if found else ""


def fields(struct: type[msgspec.Struct]) -> dict[str, Any]:
    """A struct's keys as written (kebab-case) and their types."""
    return {f.encode_name: f.type for f in msgspec.structs.fields(struct)}


def describe_type(kind: Any) -> str:
    """What a value of ``kind`` looks like, for a person: the choices of a ``Literal``."""
    args = typing.get_args(kind)
    origin = typing.get_origin(kind)
    if origin is typing.Literal:
        return "one of " + ", ".join(str(a) for a in args)
    if origin is list:
        return f"a list of {describe_type(args[0]).removeprefix('a ')}s" if args else "a list"
    if origin is dict or (isinstance(kind, type) and issubclass(kind, msgspec.Struct)):
        return "a table"
    names = [a for a in args if a is not type(None)] or [kind]
    words = [_TYPES.get(getattr(a, "__name__", ""), getattr(a, "__name__", str(a))) for a in names]
    return " or ".join(words)


def shape_problem(
    raw: Mapping[str, Any], config: type[msgspec.Struct], sections: Mapping[str, type[Any]],
    tables: Mapping[str, type[Any]],
) -> tuple[Path, str] | None:
    """The first problem in the file's structure: its place and what is wrong. ``sections``
    are tables of settings (``[limits]``, ``[openai]``), ``tables`` tables of such tables
    (``[model-overrides."<model>"]``)."""
    top = fields(config)
    known = [*(k for k in top if k not in ("providers",)), *sections]
    for key, value in raw.items():
        if key in sections:
            problem = _struct_problem(value, sections[key], (key,))
        elif key in tables and isinstance(value, Mapping):
            problem = next(
                (p for name, v in value.items()
                 if (p := _struct_problem(v, tables[key], (key, name))) is not None),
                None,
            )  # fmt: skip
        elif key in top:
            problem = _value_problem(value, top[key], (key,))
        else:
            return (key,), f"`{key}` is not a setting{did_you_mean(key, known)}"
        if problem is not None:
            return problem
    return None


def _struct_problem(value: Any, struct: type[Any], where: Path) -> tuple[Path, str] | None:
    if not isinstance(value, Mapping):
        return where, f"`{_dotted(where)}` must be a table, e.g. [{_dotted(where)}]"
    keys = fields(struct)
    for key, item in value.items():
        if key not in keys:
            return (*where, key), (
                f"[{_section(where)}] `{key}` is not a setting{did_you_mean(key, keys)}"
            )
        problem = _value_problem(item, keys[key], (*where, key))
        if problem is not None:
            return problem
    return None


def _value_problem(value: Any, kind: Any, where: Path) -> tuple[Path, str] | None:
    try:
        msgspec.convert(value, kind, str_keys=True)
    except msgspec.ValidationError as exc:
        what, path = _parts(str(exc))
        inner = re.match(_UNKNOWN, what)
        if inner is not None:
            return where, f"`{_dotted(where)}` has an unknown key `{inner.group('key')}`"
        shown = value if isinstance(value, int | float | bool) else repr(value)
        if isinstance(value, str):
            shown = f'"{value}"'
        return where, (
            f"`{_dotted(where)}{path}` must be {describe_type(kind)}, got {shown}"
            if not path
            else f"`{_dotted(where)}{path}`: {what}"
        )
    return None


def _parts(message: str) -> tuple[str, str]:
    match = re.match(_AT, message)
    assert match is not None
    return match.group("what"), match.group("path") or ""


def _dotted(where: Path) -> str:
    return ".".join(where)


def _section(where: Path) -> str:
    head, *rest = where
    return head + "".join(f'."{name}"' for name in rest)


def toml_line(text: str, where: Path) -> int | None:
    """The line (1-based) on which the key at ``where`` is written in a TOML text: under
    its ``[section]`` header, or dotted (``limits.prune-at = ...``); ``None`` when not
    found (written in an inline table, say)."""
    *section, key = where
    section_name = _section(tuple(section)) if section else ""
    current = ""
    pattern = re.compile(r"^\s*(?:\"([^\"]+)\"|'([^']+)'|([A-Za-z0-9_.\-]+))\s*=")
    header = re.compile(r"^\s*\[\s*([^\]]+?)\s*\]\s*(?:#.*)?$")
    for number, line in enumerate(text.splitlines(), 1):
        head = header.match(line)
        if head is not None:
            current = head.group(1).replace(" ", "")
            if not section and current.split(".")[0] == key:
                return number  # a whole table that should not be there
            continue
        found = pattern.match(line)
        if found is None:
            continue
        name = next(g for g in found.groups() if g is not None)
        full = f"{current}.{name}" if current else name
        if (current == section_name and name == key) or full == f"{section_name}.{key}":
            return number
    return None


def unknown_variable(env: Mapping[str, str], settings: Iterable[str]) -> str | None:
    """An ``ACP_AGENT_*`` variable that is set but read by nobody, said with the one it
    was probably meant to be."""
    known = {*settings, *KNOWN_VARIABLES}
    for name in sorted(env):
        if name.startswith("ACP_AGENT_") and name not in known:
            return f"{name} is not a setting of acp-agent{did_you_mean(name, sorted(known))}"
    return None
