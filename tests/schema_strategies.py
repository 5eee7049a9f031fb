"""Hypothesis strategies for ACP messages: values generated from the official JSON Schema,
and mutations that make them wrong in the ways clients get them wrong.

:func:`from_def` follows the schema's ``$ref``/``allOf``/``anyOf``/``oneOf``/``const``/
``enum``/``type``/``properties``/``required``/``items``/``minimum``/``maximum`` (the
subset the ACP schema uses), with small sizes. ``overrides`` replace a ``$defs`` entry or a
property (by name) with a strategy: live session ids, safe MCP servers, absolute paths.

:func:`mutate` damages a value at one spot (drop a field, add one, change a value's type,
put an odd string, an out-of-range number, a deep or huge value, or a raw token that is
not JSON there). Values that ``json`` cannot write (nesting a thousand levels deep,
``NaN``, ``1e400``) are placeholders, ``Raw`` tokens, that :func:`encode` splices into
the line.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

from .schema_check import schema_path

Json = Any
Path = tuple[str | int, ...]


def schema_defs() -> dict[str, Any]:
    return json.loads(schema_path().read_text())["$defs"]  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- raw tokens


class Raw:
    """Bytes spliced into the line in place of this value (see :func:`encode`)."""

    def __init__(self, data: bytes, readable: bool = True, levels: int = 0) -> None:
        self.data = data
        self.readable = readable  # False: the agent's decoder must refuse the line
        self.levels = levels  # how deeply it nests

    def __repr__(self) -> str:
        return f"Raw({self.data[:40]!r}{'...' if len(self.data) > 40 else ''})"


def deep_raw(levels: int, kind: str = "array") -> Raw:
    if kind == "array":
        data = b"[" * levels + b"]" * levels
    else:
        data = b'{"k":' * levels + b"null" + b"}" * levels
    return Raw(data, levels=levels)


def encode(value: Json, ensure_ascii: bool = True) -> bytes:
    """``value`` as one JSON line (``\\n`` included), :class:`Raw` tokens spliced in. With
    ``ensure_ascii=False``, lone surrogates become invalid UTF-8 bytes."""
    raws: list[Raw] = []

    def swap(v: Json) -> Json:
        if isinstance(v, Raw):
            raws.append(v)
            return f"\x00raw{len(raws) - 1}\x00"
        if isinstance(v, dict):
            return {k: swap(x) for k, x in v.items()}
        if isinstance(v, list):
            return [swap(x) for x in v]
        return v

    text = json.dumps(swap(value), ensure_ascii=ensure_ascii, separators=(",", ":"))
    line = text.encode("utf-8", "surrogatepass")
    for i, raw in enumerate(raws):
        line = line.replace(json.dumps(f"\x00raw{i}\x00").encode(), raw.data, 1)
    return line + b"\n"


def readable(value: Json) -> bool:
    """Whether the agent can decode every string and token of ``value``."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, Raw):
            if not v.readable:
                return False
        elif isinstance(v, str):
            if has_surrogate(v):
                return False
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return depth(value) <= 128


def has_surrogate(text: str) -> bool:
    """Whether ``text`` holds half a surrogate pair (which UTF-8 cannot carry)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def depth(value: Json) -> int:
    """How deeply ``value`` nests (as the agent counts: the outer object is 1)."""
    best, stack = 0, [(value, 0)]
    while stack:
        v, around = stack.pop()  # around: the containers ``v`` is in
        if isinstance(v, Raw):
            best = max(best, around + v.levels)
        elif isinstance(v, dict | list):
            best = max(best, around + 1)
            stack.extend((x, around + 1) for x in (v.values() if isinstance(v, dict) else v))
    return best


# --------------------------------------------------------------------------- generic JSON

ODD_STRINGS = st.sampled_from([
    "", " ", "\x00", "a\x00b", "/tmp/\x00", "\ud800", "x\udc00y", "\ud83d", "\u202e", "\u2028",
    "\ufeff", "\U0001f600", "é", "\\", '"', "\n", "\r\n", "../..", "/", "//", "~", "%00",
    "\x7f", "\x1b[31m", "null", "[", "{", "0" * 300, "ﷺ" * 50,
])
TEXT = st.text(max_size=12) | ODD_STRINGS
INTS = st.integers(-(2**70), 2**70) | st.sampled_from([0, -1, 65535, 65536, 2**31, 2**53, 2**64])
FLOATS = st.floats(allow_nan=False, allow_infinity=False)
SCALARS = st.none() | st.booleans() | INTS | FLOATS | TEXT
JSON_VALUES: st.SearchStrategy[Json] = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)
RAW_TOKENS = st.sampled_from([
    Raw(b"NaN", False), Raw(b"Infinity", False), Raw(b"-Infinity", False), Raw(b"1e400", False),
    Raw(b"-0", True), Raw(b"1E2", True), Raw(b"undefined", False), Raw(b"'x'", False),
    Raw(b'"\\u0000"', True), Raw(b'"\\ud800"', False), Raw(b'"\\udc00\\ud800"', False),
    Raw(b'"\xff"', False), Raw(b'"\xc0\x80"', False), Raw(b"[1,]", False), Raw(b'{"a":1,}', False),
    Raw(b"00", False), Raw(b"0x10", False), Raw(b"tru", False),
])
DEEP = st.builds(deep_raw, st.sampled_from([100, 127, 129, 500, 1_000, 5_000, 100_000]),
                 st.sampled_from(["array", "object"]))
HUGE = st.sampled_from(["x" * 100_000, "é" * 300_000, [0] * 10_000, [[]] * 50_000])
"""Big but shallow values (prebuilt: drawing one costs nothing)."""


# --------------------------------------------------------------------------- from the schema


class Generator:
    def __init__(self, overrides: Mapping[str, st.SearchStrategy[Json]] | None = None) -> None:
        self.defs = schema_defs()
        self.overrides = dict(overrides or {})
        self._refs: dict[str, st.SearchStrategy[Json]] = {}

    def definition(self, name: str) -> st.SearchStrategy[Json]:
        if name in self.overrides:
            return self.overrides[name]
        if name not in self._refs:
            self._refs[name] = st.deferred(lambda: self.node(self.defs[name]))
        return self._refs[name]

    def node(self, node: Any) -> st.SearchStrategy[Json]:
        if node is True or node == {}:
            return JSON_VALUES
        if "$ref" in node:
            return self.definition(node["$ref"].rsplit("/", 1)[-1])
        if "const" in node:
            return st.just(node["const"])
        if "enum" in node:
            return st.sampled_from(node["enum"])
        parts: list[st.SearchStrategy[Json]] = []
        own = {k: v for k, v in node.items() if k not in ("allOf", "anyOf", "oneOf")}
        if "type" in own or "properties" in own:
            parts.append(self.typed(own))
        parts += [self.node(sub) for sub in node.get("allOf", [])]
        for key in ("anyOf", "oneOf"):
            if key in node:
                parts.append(st.one_of([self.node(sub) for sub in node[key]]))
        if not parts:
            return JSON_VALUES
        if len(parts) == 1:
            return parts[0]
        return st.tuples(*parts).map(_merge)

    def typed(self, node: Any) -> st.SearchStrategy[Json]:
        kinds = node.get("type", "object")
        if isinstance(kinds, list):
            return st.one_of([self.typed({**node, "type": k}) for k in kinds])
        if kinds == "object":
            return self.object(node)
        if kinds == "array":
            items = self.node(node.get("items", True))
            return st.lists(items, min_size=node.get("minItems", 0), max_size=3)
        if kinds == "string":
            return st.text(min_size=node.get("minLength", 0), max_size=node.get("maxLength", 16))
        if kinds == "integer":
            lo, hi = _int_range(node)
            return st.integers(lo, hi)
        if kinds == "number":
            return FLOATS
        if kinds == "boolean":
            return st.booleans()
        return st.none()

    def object(self, node: Any) -> st.SearchStrategy[Json]:
        props: dict[str, Any] = node.get("properties", {})
        required = set(node.get("required", []))
        if not props:
            extra = node.get("additionalProperties", True)
            if not extra:
                return st.just({})
            return st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=2)
        fields = {
            name: self.overrides[f".{name}"] if f".{name}" in self.overrides else self.node(sub)
            for name, sub in props.items()
        }

        @st.composite
        def build(draw: st.DrawFn) -> dict[str, Json]:
            out: dict[str, Json] = {}
            for name, strategy in fields.items():
                if name in required or draw(st.integers(0, 3)) == 0:
                    out[name] = draw(strategy)
            return out

        return build()


def _merge(parts: tuple[Json, ...]) -> Json:
    dicts = [p for p in parts if isinstance(p, dict)]
    if len(dicts) != len(parts):
        return parts[-1]
    merged: dict[str, Json] = {}
    for d in dicts:
        merged.update(d)
    return merged


_FORMATS = {"uint16": (0, 65535), "uint32": (0, 2**32 - 1), "uint64": (0, 2**64 - 1),
            "int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


def _int_range(node: Any) -> tuple[int, int]:
    lo, hi = _FORMATS.get(node.get("format", ""), (-(2**63), 2**63 - 1))
    return max(lo, node.get("minimum", lo)), min(hi, node.get("maximum", hi))


# --------------------------------------------------------------------------- mutations

MUTATIONS = ("none", "none", "drop", "extra", "retype", "string", "number", "null", "raw",
             "deep", "huge")


def paths(value: Json, skip: tuple[str, ...] = ()) -> list[Path]:
    """The places in ``value`` (``()`` is the value itself; the first 16 members of each
    container), except under ``skip`` keys."""
    out: list[Path] = [()]
    stack: list[tuple[Path, Json]] = [((), value)]
    while stack:
        path, v = stack.pop()
        children = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()
        for k, x in itertools.islice(children, 16):
            out.append((*path, k))
            if k not in skip:
                stack.append(((*path, k), x))
    return out


def replaced(value: Json, path: Path, new: Json | None, drop: bool = False) -> Json:
    """A copy of ``value`` with ``new`` at ``path`` (or that member removed: ``drop``)."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    copy: Any = dict(value) if isinstance(value, dict) else list(value)
    if drop and not rest:
        del copy[head]
    else:
        copy[head] = replaced(value[head], rest, new, drop)
    return copy


def at(value: Json, path: Path) -> Json:
    for k in path:
        value = value[k]
    return value


ODD_CHARS = st.sampled_from(["\x00", "\ud800", "\udfff", "\u202e", "\ufeff", "\n", "\\", "\x1b"])


@st.composite
def mutate(draw: st.DrawFn, value: Json, skip: tuple[str, ...] = ()) -> Json:
    """``value`` damaged at one spot (or left alone: about one time in six). Strings and
    numbers are damaged where there are strings and numbers."""
    kind = draw(st.sampled_from(MUTATIONS))
    if kind == "none":
        return value
    everywhere = paths(value, skip)
    leaves = {
        "string": [p for p in everywhere if isinstance(at(value, p), str)],
        "number": [p for p in everywhere if type(at(value, p)) in (int, float)],
    }.get(kind)
    path = draw(st.sampled_from(leaves or everywhere))
    target = at(value, path)
    if kind == "string" and isinstance(target, str) and draw(st.booleans()):
        cut = draw(st.integers(0, len(target)))  # an odd character inside a real value
        return replaced(value, path, target[:cut] + draw(ODD_CHARS) + target[cut:])
    if kind == "drop":
        return replaced(value, path, None, drop=True) if path else value
    if kind == "extra":
        if not isinstance(target, dict):
            return value
        key = draw(TEXT | st.sampled_from(["_meta", "__proto__", "constructor", "sessionId"]))
        return replaced(value, path, {**target, key: draw(JSON_VALUES)})
    new: Json
    if kind == "retype":
        new = draw(JSON_VALUES.filter(lambda v: type(v) is not type(target)))
    elif kind == "string":
        new = draw(ODD_STRINGS)
    elif kind == "number":
        new = draw(INTS | FLOATS)
    elif kind == "null":
        new = None
    elif kind == "raw":
        new = draw(RAW_TOKENS)
    elif kind == "deep":
        new = draw(DEEP)
    else:
        new = draw(HUGE)
    return replaced(value, path, new)
