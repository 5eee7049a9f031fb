"""Form schemas for ``ask_user``: the model's JSON checked against what ACP's
``ElicitationSchema`` allows, and the editor's answer checked against the question.

ACP forms are flat objects of primitive fields (MCP's restricted JSON Schema): strings
(optionally a single choice: ``enum`` or ``oneOf``), numbers, integers, booleans and
multiple choices (``array`` of string options). Anything else (nested objects, unknown
keys, choices that are not strings, bounds the wrong way round, a default that is not
allowed) is a :class:`~acp_agent.errors.ToolError` naming the field, so the model can fix
its call. A question that asks for a secret is refused: form mode must not collect
them (``elicitation.mdx``).
"""

from __future__ import annotations

import re
from typing import Any, NoReturn, cast

from ..errors import ToolError
from ..protocol import UNSET, UnsetType
from ..protocol import types as t

KINDS = ("string", "number", "integer", "boolean", "array")
FORMATS = ("email", "uri", "date", "date-time")
MAX_FIELDS = 20

_COMMON = frozenset({"type", "title", "description", "default"})
_KEYS = {
    "string": _COMMON | {"minLength", "maxLength", "pattern", "format", "enum", "oneOf"},
    "number": _COMMON | {"minimum", "maximum"},
    "integer": _COMMON | {"minimum", "maximum"},
    "boolean": _COMMON,
    "array": _COMMON | {"minItems", "maxItems", "items"},
}
_TOP = ("type", "title", "description", "properties", "required")

_OPTION = {
    "type": "object",
    "properties": {
        "const": {"type": "string"},
        "title": {"type": "string"},
        "description": {"type": "string"},
    },
    "required": ["const", "title"],
}
_COUNT = {"type": "integer", "minimum": 0}
#: One field, as the model is told (``ask_user``'s parameter schema).
FIELD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "type": {"type": "string", "enum": list(KINDS)},
        "title": {"type": "string"},
        "description": {"type": "string"},
        "default": {},
        "enum": {"type": "array", "items": {"type": "string"}},
        "oneOf": {"type": "array", "items": _OPTION},
        "minLength": _COUNT,
        "maxLength": _COUNT,
        "pattern": {"type": "string"},
        "format": {"type": "string", "enum": list(FORMATS)},
        "minimum": {"type": "number"},
        "maximum": {"type": "number"},
        "minItems": _COUNT,
        "maxItems": _COUNT,
        "items": {
            "type": "object",
            "properties": {
                "type": {"type": "string", "enum": ["string"]},
                "enum": {"type": "array", "items": {"type": "string"}},
                "anyOf": {"type": "array", "items": _OPTION},
            },
        },
    },
    "required": ["type"],
}

_SECRET = re.compile(
    r"\b(pass ?words?|pass ?phrases?|passcodes?|api ?keys?|secrets?|private ?keys?|"
    r"(access|refresh|auth|bearer|api|session) ?tokens?|credit ?cards?|card ?numbers?|"
    r"cvv|cvc|iban|recovery ?codes?|seed ?phrases?|2fa|otp)\b",
    re.IGNORECASE,
)


def _bad(path: str, problem: str) -> NoReturn:
    raise ToolError(f"Invalid form schema at {path}: {problem}.")


# ---------------------------------------------------------------------- the question


def form_schema(raw: Any, message: str) -> t.ElicitationSchema:
    """The ``requestedSchema`` for ``raw`` (the model's ``schema`` argument)."""
    if not isinstance(raw, dict):
        _bad("schema", "must be an object with `properties`")
    unknown = sorted(set(raw) - set(_TOP))
    if unknown:
        _bad("schema", f"unknown key(s) {_names(unknown)}; a form schema takes {_names(_TOP)}")
    if raw.get("type", "object") != "object":
        _bad("schema.type", 'must be "object"')
    props = raw.get("properties")
    if not isinstance(props, dict) or not props:
        _bad("schema.properties", "must be an object with at least one field")
    if len(props) > MAX_FIELDS:
        _bad("schema.properties", f"{len(props)} fields; ask at most {MAX_FIELDS} at once")
    fields: dict[str, t.ElicitationPropertySchema] = {}
    for name, spec in props.items():
        if not name.strip():
            _bad("schema.properties", "a field name must not be blank")
        fields[name] = _field(f"schema.properties.{name}", spec)
    required = raw.get("required")
    if required is not None:
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            _bad("schema.required", "must be a list of field names")
        for name in required:
            if name not in props:
                _bad("schema.required", f"{name!r} is not one of the fields ({_names(props)})")
        required = list(dict.fromkeys(required))
    _refuse_secrets(message, raw, props)
    return t.ElicitationSchema(
        type="object",
        title=_text(raw, "title", "schema"),
        description=_text(raw, "description", "schema"),
        properties=fields,
        required=required or UNSET,
    )


def _field(path: str, spec: Any) -> t.ElicitationPropertySchema:
    if not isinstance(spec, dict):
        _bad(path, 'a field is an object such as {"type": "string"}')
    kind = spec.get("type")
    if kind not in KINDS:
        hint = "forms are flat: no nested objects; " if kind == "object" else ""
        _bad(f"{path}.type", f"{kind!r} is not a field type; {hint}use one of {_names(KINDS)}"
             " (array: a multiple choice of strings)")  # fmt: skip
    unknown = sorted(set(spec) - _KEYS[kind])
    if unknown:
        _bad(path, f"unknown key(s) {_names(unknown)} for a {kind} field; it takes "
             f"{_names(sorted(_KEYS[kind]))}")  # fmt: skip
    title, description = _text(spec, "title", path), _text(spec, "description", path)
    default = spec.get("default")
    if kind == "string":
        return _string(path, spec, title, description, default)
    if kind in ("number", "integer"):
        low, high = _bound(spec, "minimum", path, kind), _bound(spec, "maximum", path, kind)
        _ordered(path, "minimum", low, "maximum", high)
        if default is not None:
            problem = _number_problem(kind, default, low, high)
            if problem:
                _bad(f"{path}.default", problem)
        cls = t.NumberPropertySchema if kind == "number" else t.IntegerPropertySchema
        return cls(title=title, description=description, minimum=_opt(low),
                   maximum=_opt(high), default=_opt(_normal_default(kind, default)))  # fmt: skip
    if kind == "boolean":
        if default is not None and not isinstance(default, bool):
            _bad(f"{path}.default", "must be true or false")
        return t.BooleanPropertySchema(title=title, description=description, default=_opt(default))
    return _multi(path, spec, title, description, default)


def _string(
    path: str, spec: dict[str, Any], title: Any, description: Any, default: Any
) -> t.StringPropertySchema:
    low, high = _count(spec, "minLength", path), _count(spec, "maxLength", path)
    _ordered(path, "minLength", low, "maxLength", high)
    pattern = spec.get("pattern")
    if pattern is not None:
        if not isinstance(pattern, str):
            _bad(f"{path}.pattern", "must be a regular expression (a string)")
        try:
            re.compile(pattern)
        except re.error as exc:
            _bad(f"{path}.pattern", f"not a valid regular expression ({exc})")
    fmt = spec.get("format")
    if fmt is not None and fmt not in FORMATS:
        _bad(f"{path}.format", f"{fmt!r} is not one of {_names(FORMATS)}")
    enum, options = spec.get("enum"), spec.get("oneOf")
    if enum is not None and options is not None:
        _bad(path, "give the choices as `enum` or as `oneOf`, not both")
    choices: list[str] | None = None
    one_of: list[t.EnumOption] | UnsetType = UNSET
    if enum is not None:
        choices = _strings(enum, f"{path}.enum")
    elif options is not None:
        one_of = _options(options, f"{path}.oneOf")
        choices = [o.const for o in one_of]
    if default is not None:
        field = t.StringPropertySchema(
            min_length=_opt(low), max_length=_opt(high), pattern=_opt(pattern),
            enum=_opt(choices),
        )  # fmt: skip
        problem = _string_problem(field, default)
        if problem:
            _bad(f"{path}.default", problem)
    return t.StringPropertySchema(
        title=title, description=description, min_length=_opt(low), max_length=_opt(high),
        pattern=_opt(pattern), format=_opt(fmt), default=_opt(default),
        enum=_opt(choices) if enum is not None else UNSET, one_of=one_of,
    )  # fmt: skip


def _multi(
    path: str, spec: dict[str, Any], title: Any, description: Any, default: Any
) -> t.MultiSelectPropertySchema:
    items = spec.get("items")
    where = f"{path}.items"
    if not isinstance(items, dict):
        _bad(where, 'an array field is a multiple choice: give {"type": "string", "enum": [...]}'
             ' or {"anyOf": [{"const", "title"}, ...]}')  # fmt: skip
    unknown = sorted(set(items) - {"type", "enum", "anyOf"})
    if unknown:
        _bad(where, f"unknown key(s) {_names(unknown)}; the options are `enum` or `anyOf`")
    if items.get("type", "string") != "string":
        _bad(f"{where}.type", 'the options of a multiple choice are strings: "string"')
    has_enum, has_any = "enum" in items, "anyOf" in items
    if has_enum == has_any:
        _bad(where, "give the options as `enum` (strings) or as `anyOf` (const and title), "
             "exactly one of them")  # fmt: skip
    choice: t.MultiSelectItems
    if has_enum:
        choices = _strings(items["enum"], f"{where}.enum")
        choice = t.StringMultiSelectItems(enum=choices)
    else:
        options = _options(items["anyOf"], f"{where}.anyOf")
        choices = [o.const for o in options]
        choice = t.TitledMultiSelectItems(any_of=options)
    low, high = _count(spec, "minItems", path), _count(spec, "maxItems", path)
    _ordered(path, "minItems", low, "maxItems", high)
    if low is not None and low > len(choices):
        _bad(f"{path}.minItems", f"{low} is more than the {len(choices)} options")
    field = t.MultiSelectPropertySchema(
        items=choice, title=title, description=description, min_items=_opt(low),
        max_items=_opt(high),
    )  # fmt: skip
    if default is not None:
        problem = _multi_problem(field, default)
        if problem:
            _bad(f"{path}.default", problem)
        field.default = default
    return field


def _refuse_secrets(message: str, raw: dict[str, Any], props: dict[str, Any]) -> None:
    texts = [message, str(raw.get("title") or ""), str(raw.get("description") or "")]
    for name, spec in props.items():
        texts.append(re.sub(r"[_\-.]+", " ", name))
        texts.extend(str(spec.get(k) or "") for k in ("title", "description"))
    for text in texts:
        found = _SECRET.search(text)
        if found:
            raise ToolError(
                f"A form must not ask for secrets ({found.group(0)!r}): passwords, keys, "
                "tokens and payment data never go through a form. Ask the user to set it up "
                "themselves (an environment variable, a config file they edit)."
            )


# ---------------------------------------------------------------------- the answer


def check_answer(content: Any, schema: t.ElicitationSchema) -> dict[str, Any]:
    """The accepted values, in the question's order; ToolError if they do not fit."""
    if content is None:
        content = {}
    if not isinstance(content, dict):
        raise ToolError("The editor's answer is not an object of field values.")
    props = schema.properties if isinstance(schema.properties, dict) else {}
    required = schema.required if isinstance(schema.required, list) else []
    problems = [f"{name!r} is missing" for name in required if name not in content]
    for name, value in content.items():
        field = props.get(name)
        problem = "was not asked" if field is None else _value_problem(field, value)
        if problem:
            problems.append(f"{name!r} {problem}")
    if problems:
        raise ToolError(
            "The editor's answer does not fit the question: " + "; ".join(problems) + ". "
            "Ask again, or ask in your answer and end your turn."
        )
    return {name: _normal(props[name], content[name]) for name in props if name in content}


def _value_problem(field: t.ElicitationPropertySchema, value: Any) -> str | None:
    if isinstance(field, t.StringPropertySchema):
        return _string_problem(field, value)
    if isinstance(field, t.NumberPropertySchema | t.IntegerPropertySchema):
        kind = "number" if isinstance(field, t.NumberPropertySchema) else "integer"
        return _number_problem(kind, value, _num(field.minimum), _num(field.maximum))
    if isinstance(field, t.BooleanPropertySchema):
        return None if isinstance(value, bool) else "is not true or false"
    return _multi_problem(field, value)


def _string_problem(field: t.StringPropertySchema, value: Any) -> str | None:
    if not isinstance(value, str):
        return "is not a string"
    choices = _choices(field)
    if choices is not None and value not in choices:
        return f"is {value!r}, not one of {_names(choices)}"
    if isinstance(field.min_length, int) and len(value) < field.min_length:
        return f"is shorter than {field.min_length} characters"
    if isinstance(field.max_length, int) and len(value) > field.max_length:
        return f"is longer than {field.max_length} characters"
    if isinstance(field.pattern, str) and re.search(field.pattern, value) is None:
        return f"does not match the pattern {field.pattern!r}"
    return None


def _number_problem(kind: str, value: Any, low: float | None, high: float | None) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"is not a {kind}"
    if kind == "integer" and isinstance(value, float) and not value.is_integer():
        return "is not an integer"
    if low is not None and value < low:
        return f"is below the minimum {plain(low)}"
    if high is not None and value > high:
        return f"is above the maximum {plain(high)}"
    return None


def _multi_problem(field: t.MultiSelectPropertySchema, value: Any) -> str | None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return "is not a list of strings"
    choices = _choices(field) or []
    strange = [v for v in value if v not in choices]
    if strange:
        return f"has {_names(strange)}, not among {_names(choices)}"
    if len(set(value)) != len(value):
        return "names an option twice"
    if isinstance(field.min_items, int) and len(value) < field.min_items:
        return f"has fewer than {field.min_items} choices"
    if isinstance(field.max_items, int) and len(value) > field.max_items:
        return f"has more than {field.max_items} choices"
    return None


def _choices(field: t.ElicitationPropertySchema) -> list[str] | None:
    if isinstance(field, t.StringPropertySchema):
        if isinstance(field.enum, list):
            return field.enum
        if isinstance(field.one_of, list):
            return [o.const for o in field.one_of]
        return None
    if isinstance(field, t.MultiSelectPropertySchema):
        items = field.items
        if isinstance(items, t.StringMultiSelectItems):
            return items.enum
        return [o.const for o in items.any_of]
    return None


def _normal(field: t.ElicitationPropertySchema, value: Any) -> Any:
    """An integer sent as 3.0 is 3."""
    if isinstance(field, t.IntegerPropertySchema) and isinstance(value, float):
        return int(value)
    return value


def plain(value: Any) -> str:
    """A value as the user reads it."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "(none)"
    return str(value)


# ---------------------------------------------------------------------- helpers


def _text(spec: dict[str, Any], key: str, path: str) -> str | UnsetType:
    value = spec.get(key)
    if value is None:
        return UNSET
    if not isinstance(value, str):
        _bad(f"{path}.{key}", "must be a string")
    return value


def _count(spec: dict[str, Any], key: str, path: str) -> int | None:
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        _bad(f"{path}.{key}", "must be a whole number, 0 or more")
    return value


def _bound(spec: dict[str, Any], key: str, path: str, kind: str) -> float | None:
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        _bad(f"{path}.{key}", "must be a number")
    if kind == "integer" and not float(value).is_integer():
        _bad(f"{path}.{key}", "must be a whole number for an integer field")
    return int(value) if kind == "integer" else value


def _ordered(path: str, low_key: str, low: float | None, high_key: str, high: float | None) -> None:
    if low is not None and high is not None and low > high:
        _bad(path, f"{low_key} ({plain(low)}) is greater than {high_key} ({plain(high)})")


def _strings(value: Any, path: str) -> list[str]:
    if not isinstance(value, list) or not value:
        _bad(path, "must be a non-empty list of strings")
    if not all(isinstance(v, str) and v for v in value):
        _bad(path, "the choices must be non-empty strings")
    if len(set(value)) != len(value):
        _bad(path, "a choice appears twice")
    return cast("list[str]", list(value))


def _options(value: Any, path: str) -> list[t.EnumOption]:
    if not isinstance(value, list) or not value:
        _bad(path, 'must be a non-empty list of {"const": ..., "title": ...}')
    out: list[t.EnumOption] = []
    for i, option in enumerate(value):
        where = f"{path}[{i}]"
        if not isinstance(option, dict):
            _bad(where, 'an option is {"const": "value", "title": "label"}')
        unknown = sorted(set(option) - {"const", "title", "description"})
        if unknown:
            _bad(where, f"unknown key(s) {_names(unknown)}; an option takes const, title, "
                 "description")  # fmt: skip
        const, title = option.get("const"), option.get("title")
        if not isinstance(const, str) or not const:
            _bad(f"{where}.const", "must be a non-empty string")
        if not isinstance(title, str) or not title:
            _bad(f"{where}.title", "must be a non-empty string (the label shown)")
        out.append(t.EnumOption(const=const, title=title,
                                description=_text(option, "description", where)))  # fmt: skip
    if len({o.const for o in out}) != len(out):
        _bad(path, "a const appears twice")
    return out


def _opt(value: Any) -> Any:
    return UNSET if value is None else value


def _num(value: Any) -> float | None:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _names(items: Any) -> str:
    return ", ".join(repr(i) if isinstance(i, str) else str(i) for i in items)


def _normal_default(kind: str, value: Any) -> Any:
    return int(value) if kind == "integer" and isinstance(value, float) else value
