#!/usr/bin/env python3
"""Generate ``acp_agent/protocol/types.py`` (msgspec Structs) from the ACP JSON Schema.

Regenerate with ONE command, from the repository root::

    python tools/gen_protocol.py            # [--schema PATH] [--out PATH] [--check]

The default schema is the one shipped by the interop tests' npm package
(``tests/interop/node_modules/@agentclientprotocol/sdk/schema/v1/schema.unstable.json``)
or, when that is absent, ``../shared/acp-spec/schema.unstable.json``. The output is
run through ``ruff format`` and is deterministic: ``tests/test_protocol_types.py``
regenerates it and compares byte for byte.

The output carries types and field names only, never the schema's prose. The
rules below are the documentation of the output.

Shapes
------
* Every object type subclasses ``Wire`` (``acp_agent/protocol/_base.py``): camelCase on
  the wire, ``omit_defaults``, keyword-only, and ``_meta`` on every type. Attributes are
  snake_case; ``msgspec.field(name=...)`` is used where ``rename="camel"`` would not give
  the schema name back, where the name is a Python keyword, or where the attribute
  would shadow a name used in the class's own annotations (then it gets a ``_`` suffix).
* required -> ``x: T``; required+nullable -> ``x: T | None``; optional ->
  ``x: T | UnsetType = UNSET``; optional+nullable -> ``x: T | UnsetType | None = UNSET``
  (``None`` last, as ruff's RUF036 wants; UNSET is omitted on encode, None encodes null).
  Schema ``default`` values are NOT materialised (an omitted field stays ``UNSET``).
  Required fields are emitted before optional ones (mypy's dataclass_transform does not
  see the ``kw_only`` inherited from ``Wire``); a subclass adding required fields to a
  parent with optional ones also gets ``kw_only=True``.
* ``x-deserialize-*`` leniency (null/invalid -> default, skip invalid items) is not
  reproduced: decoding follows the schema's types.
* string -> ``str``, integer -> ``int``, number -> ``float``, boolean -> ``bool``,
  array -> ``list[T]``, object with only ``additionalProperties`` -> ``dict[str, T]``,
  no constraint (``{}``) -> ``Any``. Plain string/integer defs become ``X: TypeAlias = str``.
* Closed enums (only string consts) -> ``Literal[...]``. Open enums (string consts plus a
  plain ``{"type": "string"}`` branch) -> ``str`` plus ``<UPPER_SNAKE>_VALUES: Final``.
  ``ErrorCode`` -> ``int`` plus one ``Final`` constant per titled code.
* The JSON-RPC envelope defs (``x-docs-ignore``: AgentRequest, ClientResponse, ...) are not
  generated; ``AGENT_METHODS`` / ``CLIENT_METHODS`` / ``PROTOCOL_METHODS`` replace them.

Tagged unions (``oneOf``/``anyOf`` of ``{"properties": {F: {"const": v}}, "required": [F]}``)
------------------------------------------------------------------------------------------
* Variant ``allOf: [$ref X]`` where X is referenced exactly once in the whole schema: X itself
  becomes the tagged class ``class X(Wire, tag_field=F, tag=v)``.
* Variant ``$ref X`` where X is referenced more than once: X stays untagged and the variant is
  ``class N(X, tag_field=F, tag=v)`` with ``N = PascalCase(v)``, or, if that name is already a
  def name or an earlier generated name, ``N = PascalCase(v) + UnionName``
  (``tool_call_update`` -> ``ToolCallUpdateSessionUpdate``).
* Variant without ``$ref``: ``class PascalCase(v) + UnionName(Wire, tag_field=F, tag=v)``
  (always suffixed: ``CancelledRequestPermissionOutcome``).
* An untagged inline object variant: ``UnionName + PascalCase(its first required property)``
  (``MessageMcpResponseResult``).
* A def with its own properties plus a tagged ``oneOf``/``anyOf`` (``SessionConfigOption``,
  ``CreateElicitationResponse``): the def's properties are copied into every variant class.
* Open fallback branches (a ``not`` of the known tags) are ignored; decoding an unknown tag fails.
* The union is an alias: ``SessionUpdate: TypeAlias = UserMessageChunk | ...``.

Non-tagged composition
----------------------
* Untagged ``$ref`` mixins on an object def (``ElicitationFormMode``'s session/request scope)
  are merged into the def: their properties become fields, optional unless in every mixin.
* Variants that only constrain a property the def already declares (``IdleStateUpdate``'s
  ``stopReason``) add their extra properties to the def as optional fields.
* Unions msgspec cannot decode (two untagged object variants, tagged plus untagged variants,
  two array variants: ``McpServer``, ``AuthMethod``, ``EmbeddedResourceResource``,
  ``SetSessionConfigOptionRequest``, ``MessageMcpResponse``, ``MultiSelectItems``,
  ``SessionConfigSelectOptions``) keep precise variant classes and a precise alias (for
  encoding). If such a union is reachable from a DECODED type, a merged class
  ``<UnionName>Any`` is generated too: every variant's fields, optional unless required in
  every variant, the tag (if any) as an optional ``str``. For array variants the items are
  merged into ``<UnionName>ItemAny`` and ``<UnionName>Any: TypeAlias = list[...ItemAny]``.
  Annotations inside decoded types use the merged class.

Order
-----
* Annotations are objects, evaluated when a class is made (no ``from __future__ import
  annotations``): msgspec then builds a decoder's plan without compiling each annotation's
  text (~3x faster on the way to the ``initialize`` and ``session/new`` answers). So the
  classes and the union aliases come each after everything its annotations name (in the
  schema's order otherwise); a reference back into a cycle would stay text (quoted), and
  an alias naming a class not yet made is an error.

Decoded types
-------------
What the agent receives: ``x-side: agent`` request/notification params, ``x-side: client``
responses, ``CancelRequestNotification`` (``x-side: protocol``), plus ``SessionNotification``
(the agent re-reads its own session history, and tests decode it). Everything reachable
from them is decodable by ``msgspec.json.Decoder``. Proxy defs are generated but left out
of the method tables.

Method tables
-------------
``AGENT_METHODS`` (x-side agent), ``CLIENT_METHODS`` (x-side client) and ``PROTOCOL_METHODS``
map a method to ``(params type, result type or None for a notification)``. The side the
agent decodes uses the decodable type (``SetSessionConfigOptionRequestAny``,
``MessageMcpResponseAny``). Some entries are union aliases (``CreateElicitationRequest``),
so the value type is ``tuple[type | UnionType, type | UnionType | None]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import keyword
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "acp_agent" / "protocol" / "types.py"
NODE_SCHEMA = (
    ROOT / "tests/interop/node_modules/@agentclientprotocol/sdk/schema/v1/schema.unstable.json"
)
SHARED_SCHEMA = ROOT.parent / "shared" / "acp-spec" / "schema.unstable.json"
SDK_PACKAGE = "@agentclientprotocol/sdk"

# Keys that never change the Python type.
_DOC_KEYS = frozenset(
    {
        "description",
        "title",
        "default",
        "format",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "discriminator",
        "x-docs-ignore",
        "x-side",
        "x-method",
        "x-deserialize-default-on-error",
        "x-deserialize-default-on-null",
        "x-deserialize-skip-invalid-items",
    }
)
_SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}
_NULL = {"type": "null"}

Schema = dict[str, Any]


class SchemaShapeError(Exception):
    """The schema uses a shape this generator does not know how to represent."""


def default_schema_path() -> Path:
    return NODE_SCHEMA if NODE_SCHEMA.exists() else SHARED_SCHEMA


def core(s: Schema) -> Schema:
    return {k: v for k, v in s.items() if k not in _DOC_KEYS}


def ref_of(s: Schema) -> str | None:
    """The def name of ``{"$ref": ...}`` or ``{"allOf": [{"$ref": ...}]}``, else None."""
    if "$ref" in s:
        return str(s["$ref"]).rsplit("/", 1)[-1]
    all_of = s.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and "$ref" in all_of[0]:
        return str(all_of[0]["$ref"]).rsplit("/", 1)[-1]
    return None


def pascal(value: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in re.split(r"[^A-Za-z0-9]+", value) if p)


def snake(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()


def upper_snake(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", snake(name)).strip("_").upper()


_camel_cache: dict[str, str] = {}


def camel(py_name: str) -> str:
    """What msgspec's ``rename="camel"`` turns ``py_name`` into."""
    if py_name not in _camel_cache:
        import msgspec

        struct = msgspec.defstruct("_Probe", [(py_name, int)], rename="camel")
        _camel_cache[py_name] = msgspec.structs.fields(struct)[0].encode_name
    return _camel_cache[py_name]


def iter_refs(s: Any) -> Iterator[str]:
    if isinstance(s, dict):
        if "$ref" in s:
            yield str(s["$ref"]).rsplit("/", 1)[-1]
        for v in s.values():
            yield from iter_refs(v)
    elif isinstance(s, list):
        for v in s:
            yield from iter_refs(v)


# --------------------------------------------------------------------------- model


@dataclass
class Field:
    wire: str
    schemas: list[Schema]  # several only in merged classes
    required: bool
    tag: bool = False  # the (optional, ``str``) tag field of a merged class


@dataclass
class ClassDef:
    name: str
    parent: str  # "Wire" or another ClassDef name
    fields: list[Field]
    order: tuple[int, int]
    tag_field: str | None = None
    tag: str | None = None
    validate_def: str | None = None  # the def its encoded form must validate against
    merged: bool = False


@dataclass
class Variant:
    kind: str  # "tagged" | "ref" | "inline" | "array"
    tag_field: str | None = None
    tag: str | None = None
    ref: str | None = None
    props: dict[str, Schema] = field(default_factory=dict)
    required: list[str] = field(default_factory=list)


@dataclass
class Union:
    name: str
    order: tuple[int, int]
    members: list[str]  # ClassDef names, or "list[<Item>]" for array variants
    decodable: bool
    array_items: list[str] = field(default_factory=list)
    merged: str | None = None  # name of the merged ``<Name>Any`` (class or list alias)


@dataclass
class Alias:
    name: str
    order: tuple[int, int]
    expr: str
    late: bool  # references classes, so it must follow them
    values_const: tuple[str, tuple[str, ...]] | None = None
    int_consts: list[tuple[str, int]] = field(default_factory=list)


@dataclass
class Model:
    defs: dict[str, Schema]
    classes: dict[str, ClassDef] = field(default_factory=dict)
    unions: dict[str, Union] = field(default_factory=dict)
    aliases: dict[str, Alias] = field(default_factory=dict)
    decoded: set[str] = field(default_factory=set)
    # side -> method -> (params type name, result type name | None)
    tables: dict[str, dict[str, tuple[str, str | None]]] = field(default_factory=dict)
    decoded_roots: list[str] = field(default_factory=list)

    def entity(self, name: str) -> ClassDef | Union | Alias:
        for table in (self.classes, self.unions, self.aliases):
            if name in table:
                return table[name]
        raise KeyError(name)

    def all_names(self) -> set[str]:
        return set(self.defs) | set(self.classes) | set(self.unions) | set(self.aliases)

    def class_fields(self, cls: ClassDef) -> list[Field]:
        """All fields, inherited ones first."""
        inherited = [] if cls.parent == "Wire" else self.class_fields(self.classes[cls.parent])
        return inherited + cls.fields


def _fields_from(props: dict[str, Schema], required: list[str] | set[str]) -> list[Field]:
    return [
        Field(wire, [schema], wire in required) for wire, schema in props.items() if wire != "_meta"
    ]


def _variant(raw: Schema) -> Variant | None:
    """Classify one ``oneOf``/``anyOf`` branch; None for an open fallback branch."""
    if "not" in raw:
        return None
    v = core(raw)
    props: dict[str, Schema] = v.get("properties", {})
    required: list[str] = v.get("required", [])
    consts = [k for k, p in props.items() if "const" in p]
    ref = ref_of(v)
    if len(consts) == 1 and consts[0] in required:
        f = consts[0]
        extra = {k: p for k, p in props.items() if k != f}
        return Variant("tagged", f, str(props[f]["const"]), ref, extra, required)
    if ref is not None and not props:
        return Variant("ref", ref=ref)
    if v.get("type") == "array":
        item = ref_of(v.get("items", {}))
        if item is None:
            raise SchemaShapeError(f"array variant without $ref items: {raw}")
        return Variant("array", ref=item)
    if props:
        return Variant("inline", props=props, required=required)
    raise SchemaShapeError(f"unsupported union variant: {raw}")


def build_model(schema: Schema) -> Model:
    defs: dict[str, Schema] = schema["$defs"]
    model = Model(defs)
    refcount: dict[str, int] = {}
    for r in iter_refs(schema):
        refcount[r] = refcount.get(r, 0) + 1
    index = {name: i for i, name in enumerate(defs)}
    pending_unions: list[tuple[str, dict[str, Schema], list[str], list[Variant]]] = []

    # Pass 1: aliases, enums, plain classes; unions are collected for pass 2.
    for name, raw in defs.items():
        if raw.get("x-docs-ignore"):
            continue  # JSON-RPC envelopes
        order = (index[name], 0)
        c = core(raw)
        comp = c.get("oneOf", c.get("anyOf"))
        props: dict[str, Schema] = c.get("properties", {})
        required: list[str] = c.get("required", [])
        is_object = c.get("type") == "object" or "properties" in c

        if not c:
            model.aliases[name] = Alias(name, order, "Any", late=False)
        elif set(c) == {"allOf"} and ref_of(c):
            model.aliases[name] = Alias(name, order, str(ref_of(c)), late=True)
        elif comp is None and is_object:
            model.classes[name] = ClassDef(
                name, "Wire", _fields_from(props, required), order, validate_def=name
            )
        elif comp is None and c.get("type") in _SCALARS and not {"const", "enum"} & set(c):
            model.aliases[name] = Alias(name, order, _SCALARS[c["type"]], late=False)
        elif comp is None:
            raise SchemaShapeError(f"{name}: unsupported def shape")
        elif is_object:
            _object_composite(model, name, order, props, required, comp, pending_unions)
        else:
            _plain_union(model, name, order, comp, pending_unions)

    # Pass 2: unions (they may tag classes created in pass 1).
    for name, base_props, base_required, variants in pending_unions:
        _build_union(model, name, base_props, base_required, variants, refcount, index)

    _compute_decoded(model)
    _build_tables(model)
    return model


def _plain_union(
    model: Model,
    name: str,
    order: tuple[int, int],
    comp: list[Schema],
    pending: list[tuple[str, dict[str, Schema], list[str], list[Variant]]],
) -> None:
    branches = [core(b) for b in comp]
    str_consts = [b["const"] for b in branches if b.get("type") == "string" and "const" in b]
    int_consts = [b for b in branches if b.get("type") == "integer" and "const" in b]
    plain = [b for b in branches if set(b) == {"type"}]
    if str_consts and len(str_consts) == len(branches):
        lit = ", ".join(json.dumps(v) for v in str_consts)
        model.aliases[name] = Alias(name, order, f"Literal[{lit}]", late=False)
    elif str_consts and len(str_consts) + 1 == len(branches) and plain == [{"type": "string"}]:
        model.aliases[name] = Alias(
            name, order, "str", late=False,
            values_const=(f"{upper_snake(name)}_VALUES", tuple(str_consts)),
        )  # fmt: skip
    elif int_consts and len(int_consts) + 1 == len(branches) and plain == [{"type": "integer"}]:
        titled = [(upper_snake(str(comp[i]["title"])), int(b["const"]))
                  for i, b in enumerate(branches) if "const" in b]  # fmt: skip
        model.aliases[name] = Alias(name, order, "int", late=False, int_consts=titled)
    elif all(_is_scalar_branch(b) for b in branches):
        exprs = sorted((_scalar_expr(b) for b in branches), key=lambda e: e == "None")
        model.aliases[name] = Alias(name, order, " | ".join(exprs), late=False)
    elif len(branches) == 1 and ref_of(branches[0]) and set(branches[0]) == {"allOf"}:
        model.aliases[name] = Alias(name, order, str(ref_of(branches[0])), late=True)
    else:
        variants = [v for v in (_variant(b) for b in comp) if v is not None]
        pending.append((name, {}, [], variants))


def _is_scalar_branch(b: Schema) -> bool:
    if b.get("type") == "array":
        return _is_scalar_branch(core(b.get("items", {})))
    return b.get("type") in (*_SCALARS, "null") and set(b) == {"type"}


def _scalar_expr(b: Schema) -> str:
    if b["type"] == "array":
        return f"list[{_scalar_expr(core(b['items']))}]"
    return "None" if b["type"] == "null" else _SCALARS[b["type"]]


def _ref_props(model: Model, ref: str) -> tuple[dict[str, Schema], list[str]]:
    d = core(model.defs[ref])
    if "oneOf" in d or "anyOf" in d or ("properties" not in d and d.get("type") != "object"):
        raise SchemaShapeError(f"mixin {ref} is not a plain object")
    return d.get("properties", {}), d.get("required", [])


def _merge_fields(groups: list[list[Field]], tag_field: str | None = None) -> list[Field]:
    """Union of fields: required only if required in every group."""
    merged: dict[str, Field] = {}
    if tag_field is not None:
        merged[tag_field] = Field(tag_field, [{"type": "string"}], False, tag=True)
    for group in groups:
        for f in group:
            if f.wire in merged:
                m = merged[f.wire]
                for s in f.schemas:
                    if s not in m.schemas:
                        m.schemas.append(s)
            else:
                merged[f.wire] = Field(f.wire, list(f.schemas), f.required)
    for wire, m in merged.items():
        m.required = all(any(f.wire == wire and f.required for f in g) for g in groups)
    return list(merged.values())


def _object_composite(
    model: Model,
    name: str,
    order: tuple[int, int],
    props: dict[str, Schema],
    required: list[str],
    comp: list[Schema],
    pending: list[tuple[str, dict[str, Schema], list[str], list[Variant]]],
) -> None:
    variants = [v for v in (_variant(b) for b in comp) if v is not None]
    base = _fields_from(props, required)
    if all(v.kind == "ref" for v in variants):
        # Untagged mixins: merge their properties into the def.
        groups = [_fields_from(*_ref_props(model, str(v.ref))) for v in variants]
        extra = [f for f in _merge_fields(groups) if f.wire not in props]
        model.classes[name] = ClassDef(name, "Wire", base + extra, order, validate_def=name)
        return
    constraint_only = all(
        (v.kind == "tagged" and v.tag_field in props)
        or (v.kind == "inline" and set(v.props) <= set(props))
        for v in variants
    )
    if constraint_only:
        # The variants only narrow a declared property; keep any properties they add.
        extra_groups = []
        for v in variants:
            if v.ref:
                p, _ = _ref_props(model, v.ref)
                extra_groups.append(_fields_from(p, []))
        extra = (
            [f for f in _merge_fields(extra_groups) if f.wire not in props] if extra_groups else []
        )
        for f in extra:
            f.required = False
        model.classes[name] = ClassDef(name, "Wire", base + extra, order, validate_def=name)
        return
    pending.append((name, props, required, variants))


def _unique(model: Model, candidate: str, fallback: str) -> str:
    taken = model.all_names()
    if candidate not in taken:
        return candidate
    if fallback not in taken:
        return fallback
    raise SchemaShapeError(f"cannot name variant: {candidate} and {fallback} both taken")


def _build_union(
    model: Model,
    name: str,
    base_props: dict[str, Schema],
    base_required: list[str],
    variants: list[Variant],
    refcount: dict[str, int],
    index: dict[str, int],
) -> None:
    tag_fields = {v.tag_field for v in variants if v.kind == "tagged"}
    if len(tag_fields) > 1:
        raise SchemaShapeError(f"{name}: variants tagged on different fields {tag_fields}")
    members: list[str] = []
    array_items: list[str] = []
    seq = 1
    for v in variants:
        base = _fields_from(base_props, base_required)
        if v.kind == "tagged":
            extra = base + _fields_from(v.props, v.required)
            target = model.classes.get(v.ref) if v.ref else None
            if v.ref and target is None:
                raise SchemaShapeError(f"{name}: tagged variant refers to non-class {v.ref}")
            if target is not None and refcount.get(target.name, 0) == 1 and target.tag is None:
                have = {f.wire for f in target.fields}
                target.fields = [f for f in extra if f.wire not in have] + target.fields
                target.tag_field, target.tag, target.validate_def = v.tag_field, v.tag, name
                cls = target
            else:
                if target is not None:
                    cname = _unique(model, pascal(str(v.tag)), pascal(str(v.tag)) + name)
                    have = {f.wire for f in model.class_fields(target)}
                    extra = [f for f in extra if f.wire not in have]
                else:
                    cname = _unique(model, pascal(str(v.tag)) + name, pascal(str(v.tag)) + name)
                cls = ClassDef(
                    cname, target.name if target else "Wire", extra, (index[name], seq),
                    tag_field=v.tag_field, tag=v.tag, validate_def=name,
                )  # fmt: skip
                model.classes[cname] = cls
                seq += 1
            if any(f.wire == cls.tag_field for f in model.class_fields(cls)):
                raise SchemaShapeError(f"{cls.name}: tag field {cls.tag_field} is also a field")
            members.append(cls.name)
        elif v.kind == "ref":
            if base_props or v.ref not in model.classes:
                raise SchemaShapeError(f"{name}: untagged variant {v.ref} not supported")
            members.append(str(v.ref))
        elif v.kind == "inline":
            first = next((p for p in v.required if p not in base_props), next(iter(v.props)))
            cname = _unique(model, name + pascal(first), name + pascal(first))
            model.classes[cname] = ClassDef(
                cname, "Wire", base + _fields_from(v.props, v.required), (index[name], seq),
                validate_def=name,
            )  # fmt: skip
            seq += 1
            members.append(cname)
        else:  # array
            array_items.append(str(v.ref))
            members.append(f"list[{v.ref}]")
    objects = [v for v in variants if v.kind != "array"]
    all_tagged = bool(objects) and all(v.kind == "tagged" for v in objects)
    decodable = len(array_items) <= 1 and (all_tagged or len(objects) <= 1)
    model.unions[name] = Union(name, (index[name], 0), members, decodable, array_items)


def _ensure_merged(model: Model, u: Union) -> str:
    if u.merged:
        return u.merged
    order = (u.order[0], 900)
    if u.array_items:
        if len(u.array_items) != len(u.members):
            raise SchemaShapeError(f"{u.name}: cannot merge arrays with objects")
        groups = [model.class_fields(model.classes[i]) for i in u.array_items]
        item = _unique(model, u.name + "ItemAny", u.name + "ItemAny")
        model.classes[item] = ClassDef(item, "Wire", _merge_fields(groups), order, merged=True)
        u.merged = _unique(model, u.name + "Any", u.name + "Any")
        model.aliases[u.merged] = Alias(u.merged, (order[0], 901), f"list[{item}]", late=True)
        return u.merged
    classes = [model.classes[m] for m in u.members]
    tag_fields = {c.tag_field for c in classes if c.tag_field}
    groups = [model.class_fields(c) for c in classes]
    u.merged = _unique(model, u.name + "Any", u.name + "Any")
    model.classes[u.merged] = ClassDef(
        u.merged, "Wire", _merge_fields(groups, next(iter(tag_fields), None)), order,
        merged=True,
    )  # fmt: skip
    return u.merged


def _decode_name(model: Model, name: str) -> str:
    u = model.unions.get(name)
    if u is not None and not u.decodable:
        return _ensure_merged(model, u)
    return name


def _compute_decoded(model: Model) -> None:
    roots = []
    for name, d in model.defs.items():
        side, method = d.get("x-side"), d.get("x-method")
        if method is None:
            continue
        inbound = side in ("agent", "client") and (side == "agent") != name.endswith("Response")
        if inbound or side == "protocol" or name == "SessionNotification":
            roots.append(name)
    model.decoded_roots = roots
    work = [_decode_name(model, r) for r in roots]
    seen: set[str] = set()
    while work:
        name = work.pop(0)
        if name in seen:
            continue
        seen.add(name)
        ent = model.entity(name)
        if isinstance(ent, ClassDef):
            if ent.parent != "Wire":
                work.append(ent.parent)
            for f in ent.fields:
                for s in f.schemas:
                    work.extend(_decode_name(model, r) for r in iter_refs(s))
        elif isinstance(ent, Union):
            if not ent.decodable:
                work.append(_ensure_merged(model, ent))
            else:
                work.extend(ent.array_items)
                work.extend(m for m in ent.members if not m.startswith("list["))
        else:
            work.extend(w for w in re.findall(r"[A-Za-z_]\w*", ent.expr) if w in model.all_names())
    model.decoded = seen


def _build_tables(model: Model) -> None:
    sides: dict[str, dict[str, dict[str, str]]] = {}
    for name, d in model.defs.items():
        side, method = d.get("x-side"), d.get("x-method")
        if method is None or side == "proxy":
            continue
        kind = next((k for k in ("Request", "Notification", "Response") if name.endswith(k)), None)
        if kind is None:
            raise SchemaShapeError(f"{name}: cannot tell request/notification/response")
        sides.setdefault(str(side), {}).setdefault(str(method), {})[kind] = name
    model.tables = {}
    for side, methods in sides.items():
        table: dict[str, tuple[str, str | None]] = {}
        for method, kinds in methods.items():
            params = kinds.get("Request") or kinds.get("Notification")
            if params is None:
                raise SchemaShapeError(f"{method}: no params type")
            result = kinds.get("Response") if "Request" in kinds else None
            if side == "client":  # we send params, we decode the result
                table[method] = (params, _decode_name(model, result) if result else None)
            else:  # we decode params, we send the result
                table[method] = (_decode_name(model, params), result)
        model.tables[side] = table


# --------------------------------------------------------------------------- emit


def _type_expr(model: Model, s: Schema, decoded: bool) -> tuple[str, bool]:
    """(Python type without None, nullable) for a property schema."""
    c = core(s)
    ref = ref_of(c)
    if ref is not None and set(c) <= {"$ref", "allOf"}:
        return (_decode_name(model, ref) if decoded else ref), False
    for key in ("anyOf", "oneOf"):
        if key in c and set(c) == {key}:
            branches = [b for b in c[key] if core(b) != _NULL]
            nullable = len(branches) != len(c[key])
            exprs = []
            for b in branches:
                e, n = _type_expr(model, b, decoded)
                nullable = nullable or n
                exprs.append(e)
            return " | ".join(dict.fromkeys(exprs)), nullable
    t = c.get("type")
    if t is None:
        if set(c) - {"additionalProperties"}:
            raise SchemaShapeError(f"unsupported property schema: {s}")
        return "Any", False
    types = t if isinstance(t, list) else [t]
    nullable = "null" in types
    types = [x for x in types if x != "null"]
    if len(types) != 1:
        raise SchemaShapeError(f"unsupported property type: {s}")
    t = types[0]
    if t in _SCALARS:
        if "const" in c:
            return f"Literal[{json.dumps(c['const'])}]", nullable
        return _SCALARS[t], nullable
    if t == "array":
        item, item_null = _type_expr(model, c.get("items", {}), decoded)
        return f"list[{item} | None]" if item_null else f"list[{item}]", nullable
    if t == "object":
        if "properties" in c:
            raise SchemaShapeError(f"inline object with properties: {s}")
        ap = c.get("additionalProperties", True)
        value = "Any" if ap is True or ap == {} else _type_expr(model, ap, decoded)[0]
        return f"dict[str, {value}]", nullable
    raise SchemaShapeError(f"unsupported property type: {s}")


def _field_line(model: Model, f: Field, decoded: bool, taken: set[str]) -> tuple[str, str, str]:
    """(python name, annotation, default expression or "")."""
    exprs: list[str] = []
    nullable = False
    for s in f.schemas:
        e, n = _type_expr(model, s, decoded)
        nullable = nullable or n
        exprs.append(e)
    expr = " | ".join(dict.fromkeys(" | ".join(exprs).split(" | ")))
    if "Any" in expr.split(" | "):
        expr, nullable = "Any", False
    if not f.required:
        expr += " | UnsetType"
    if nullable:
        expr += " | None"
    py = snake(f.wire)
    explicit = camel(py) != f.wire
    if keyword.iskeyword(py) or py in taken or py == "meta":
        py, explicit = py + "_", True
    default = "UNSET" if not f.required else ""
    if explicit:
        default = (
            f"msgspec.field(default=UNSET, name={json.dumps(f.wire)})"
            if not f.required
            else f"msgspec.field(name={json.dumps(f.wire)})"
        )
    return py, expr, default


def _emit_class(model: Model, cls: ClassDef) -> list[str]:
    decoded = cls.name in model.decoded
    head = cls.parent
    if cls.tag_field is not None:
        head += f", tag_field={cls.tag_field!r}, tag={cls.tag!r}"
    # Required fields first: mypy's dataclass_transform does not see the inherited kw_only.
    fields = [f for f in cls.fields if f.required] + [f for f in cls.fields if not f.required]
    if cls.parent != "Wire" and any(f.required for f in fields):
        head += ", kw_only=True"
    lines = [f"class {cls.name}({head}):"]
    # Names used in this class's annotations must not be shadowed by its attributes.
    rendered = [_field_line(model, f, decoded, set()) for f in fields]
    used = {w for _, ann, _ in rendered for w in re.findall(r"[A-Za-z_]\w*", ann)}
    body = []
    for f in fields:
        py, ann, default = _field_line(model, f, decoded, used)
        body.append(f"    {py}: {ann}" + (f" = {default}" if default else ""))
    names = [b.split(":")[0].strip() for b in body]
    if len(set(names)) != len(names):
        raise SchemaShapeError(f"{cls.name}: duplicate attribute names {names}")
    return lines + (body or ["    pass"])


def _names(text: str) -> list[str]:
    return re.findall(r"[A-Za-z_]\w*", text)


def render(model: Model, header: list[str]) -> str:
    out: list[str] = [*header, ""]
    body: list[str] = []

    early = sorted((a for a in model.aliases.values() if not a.late), key=lambda a: a.order)
    for a in early:
        body.append(f"{a.name}: TypeAlias = {a.expr}")
        if a.values_const:
            const, values = a.values_const
            items = ", ".join(json.dumps(v) for v in values) + ("," if len(values) == 1 else "")
            body.append(f"{const}: Final = ({items})")
        for const, value in a.int_consts:
            body.append(f"{const}: Final[int] = {value}")
    body.append("")

    # Classes and the aliases naming them, each after what its annotations name: the
    # annotations are evaluated when the class is made (no ``from __future__ import
    # annotations``), so a decoder's plan finds them built rather than compiling each
    # annotation's text on the type's first decoding. A reference back into a cycle
    # stays text (quoted), resolved then.
    late: dict[str, tuple[tuple[int, int], str]] = {
        a.name: (a.order, a.expr) for a in model.aliases.values() if a.late
    }
    late.update((u.name, (u.order, " | ".join(u.members))) for u in model.unions.values())
    rendered = {c.name: _emit_class(model, c) for c in model.classes.values()}
    deps: dict[str, list[str]] = {name: _names(expr) for name, (_, expr) in late.items()}
    for cls in model.classes.values():
        words = _names(" ".join(line.split(":", 1)[1] for line in rendered[cls.name][1:]
                                if ":" in line))  # fmt: skip
        deps[cls.name] = [*([cls.parent] if cls.parent != "Wire" else []), *words]
    emitted: set[str] = set()
    visiting: set[str] = set()

    def emit(name: str) -> None:
        if name in emitted or name in visiting:
            return
        visiting.add(name)
        for dep in deps[name]:
            if dep in deps and dep != name:
                emit(dep)
        visiting.discard(name)
        emitted.add(name)
        if name in late:
            undefined = [d for d in deps[name] if d in deps and d not in emitted]
            if undefined:
                raise SchemaShapeError(f"alias {name} names {undefined} before they are made")
            body.append(f"{name}: TypeAlias = {late[name][1]}")
            return
        lines = list(rendered[name])
        for i, line in enumerate(lines[1:], 1):
            attr, sep, rest = line.partition(": ")
            ann, eq, default = rest.partition(" = ")
            if sep and any(d in deps and d not in emitted for d in _names(ann)):
                lines[i] = f"{attr}: {json.dumps(ann)}{eq}{default}"
        body.extend(["", "", *lines, "", ""])

    order = {name: late[name][0] for name in late}
    order.update((c.name, c.order) for c in model.classes.values())
    for name in sorted(order, key=lambda n: (order[n], n)):
        emit(name)
    body.append("")

    table_titles = {
        "agent": "AGENT_METHODS",
        "client": "CLIENT_METHODS",
        "protocol": "PROTOCOL_METHODS",
    }
    for side, title in table_titles.items():
        body.append(
            f"{title}: Final[dict[str, tuple[type | UnionType, type | UnionType | None]]] = {{"
        )
        for method, (params, result) in model.tables.get(side, {}).items():
            body.append(f"    {method!r}: ({params}, {result}),")
        body.append("}")

    text = "\n".join(body)
    words = set(re.findall(r"[A-Za-z_]\w*", text))
    typing_names = [n for n in ("Any", "Final", "Literal", "TypeAlias") if n in words]
    out.append("from types import UnionType")
    out.append(f"from typing import {', '.join(typing_names)}")
    out.append("")
    if "msgspec.field" in text:
        out.append("import msgspec")
    out.append("from msgspec import UNSET, UnsetType")
    out.append("")
    out.append("from ._base import Wire")
    out.append("")
    return "\n".join(out) + "\n" + text + "\n"


# --------------------------------------------------------------------------- cli


def _sdk_version(schema_path: Path, sha: str, previous: list[Path]) -> str | None:
    for parent in schema_path.resolve().parents:
        pkg = parent / "package.json"
        if pkg.is_file():
            data = json.loads(pkg.read_text(encoding="utf-8"))
            if data.get("name") == SDK_PACKAGE and data.get("version"):
                return str(data["version"])
            break
    # Not from the npm package: keep the version recorded for this exact schema, if any.
    for path in previous:
        if path.is_file():
            head = path.read_text(encoding="utf-8")[:1000]
            m = re.search(re.escape(SDK_PACKAGE) + r" ([^)\s]+)\)", head)
            if m and f"sha256 {sha}" in head:
                return m.group(1)
    return None


def header_lines(schema_name: str, version: str | None, sha: str) -> list[str]:
    ver = f"{SDK_PACKAGE} {version}" if version else f"{SDK_PACKAGE}, version unknown"
    return [
        f"# Generated by tools/gen_protocol.py from {schema_name}",
        f"# ({ver}). Do not edit.",
        f"# schema sha256 {sha}",
        "# Regenerate: python tools/gen_protocol.py",
    ]


def ruff_format(source: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(DEFAULT_OUT), "-"],
        input=source,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"ruff format failed:\n{proc.stderr}")
    return proc.stdout


def generate(schema_path: Path, out: Path, sdk_version: str | None = None) -> str:
    raw = schema_path.read_bytes()
    sha = hashlib.sha256(raw).hexdigest()
    version = sdk_version or _sdk_version(schema_path, sha, [out, DEFAULT_OUT])
    model = build_model(json.loads(raw))
    return ruff_format(render(model, header_lines(schema_path.name, version, sha)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--schema", type=Path, default=None, help="schema.unstable.json path")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output module path")
    parser.add_argument("--sdk-version", default=None, help="SDK version for the header")
    parser.add_argument("--check", action="store_true", help="fail if --out is not up to date")
    args = parser.parse_args(argv)
    schema_path: Path = args.schema or default_schema_path()
    source = generate(schema_path, args.out, args.sdk_version)
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.is_file() else ""
        if current != source:
            print(f"{args.out} is out of date; run: python tools/gen_protocol.py", file=sys.stderr)
            return 1
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(source, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
