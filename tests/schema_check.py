"""Validates every message the agent emits against the official ACP JSON Schema.

Each message is checked against its own definition: the JSON-RPC envelope by hand, then
requests' params against ``<Method>Request`` (e.g. ``RequestPermissionRequest``),
notifications against theirs (``SessionNotification``), results against the response
definition of the request they answer, and errors against ``Error``. The checker must
see the client's requests too (``observe_inbound``) to know which method a response
answers.

Only complete lines are messages. An agent killed with SIGKILL (a crash the test makes)
may die between the ``write`` calls of one batch of lines, so the output can end in a
line cut short: that fragment is not a message the agent sent and is not checked
(:meth:`SchemaChecker.unterminated`); every complete line before it still is. An output
that ends without a newline in any other case (the agent exited by itself) is a
violation.
"""

from __future__ import annotations

import json
import threading
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource

ROOT = Path(__file__).resolve().parent.parent
NPM_SCHEMA = (
    ROOT / "tests/interop/node_modules/@agentclientprotocol/sdk/schema/v1/schema.unstable.json"
)
SHARED_SCHEMA = ROOT.parent / "shared/acp-spec/schema.unstable.json"


def schema_path() -> Path:
    if NPM_SCHEMA.exists():
        return NPM_SCHEMA
    if SHARED_SCHEMA.exists():
        return SHARED_SCHEMA
    raise RuntimeError(
        "ACP schema not found: run `npm ci --prefix tests/interop` (see README)"
    )


@cache
def _schema() -> dict[str, Any]:
    return json.loads(schema_path().read_text())  # type: ignore[no-any-return]


@cache
def _tables() -> tuple[dict[str, str], dict[str, str], dict[str, str], dict[str, str]]:
    """(agent-sent requests/notifications, agent results) by method, for each side."""
    sent: dict[str, str] = {}  # method -> def for params the agent sends (x-side client)
    results: dict[str, str] = {}  # method -> def for results the agent sends (x-side agent)
    client_sent: dict[str, str] = {}
    client_results: dict[str, str] = {}
    for name, d in _schema()["$defs"].items():
        method, side = d.get("x-method"), d.get("x-side")
        if not method:
            continue
        if name.endswith("Response"):
            (results if side == "agent" else client_results)[method] = name
        elif side == "client":
            sent[method] = name
        elif side in ("agent", "protocol"):
            client_sent[method] = name
    return sent, results, client_sent, client_results


def _dispatch_on_discriminators(node: Any) -> Any:
    """The schema with every ``oneOf`` that has a ``discriminator`` (each alternative
    requiring its own ``const`` value of that property) rewritten as "the property is one
    of those values, and if it is this one, then this alternative": the same instances
    are valid, but only the matching alternative is checked, not all of them (19 for a
    session update), which makes validation several times faster."""
    if isinstance(node, list):
        return [_dispatch_on_discriminators(v) for v in node]
    if not isinstance(node, dict):
        return node
    node = {k: _dispatch_on_discriminators(v) for k, v in node.items()}
    prop = (node.get("discriminator") or {}).get("propertyName")
    alts = node.get("oneOf")
    if not prop or not isinstance(alts, list):
        return node
    consts = [a.get("properties", {}).get(prop, {}).get("const") for a in alts]
    if (
        None in consts
        or len(set(map(json.dumps, consts))) != len(consts)
        or not all(prop in a.get("required", ()) and a.get("type") == "object" for a in alts)
    ):
        return node  # not a plain tagged union: keep oneOf
    del node["oneOf"], node["discriminator"]
    node["allOf"] = [
        *node.get("allOf", []),
        {"type": "object", "required": [prop], "properties": {prop: {"enum": consts}}},
        *({"if": {"properties": {prop: {"const": c}}}, "then": a}
          for c, a in zip(consts, alts, strict=True)),
    ]
    return node


@cache
def _validator(def_name: str) -> jsonschema.protocols.Validator:
    schema = _dispatch_on_discriminators(_schema())
    registry: Registry[Any] = Registry().with_resource("urn:acp", Resource.from_contents(schema))
    cls = jsonschema.validators.validator_for(schema)
    return cls({"$ref": f"urn:acp#/$defs/{def_name}"}, registry=registry)


def validate_def(def_name: str, instance: Any) -> list[str]:
    errors = sorted(_validator(def_name).iter_errors(instance), key=lambda e: list(e.path))
    return [f"{def_name} at {'/'.join(map(str, e.path)) or '.'}: {e.message}" for e in errors[:3]]


def _valid_id(value: Any) -> bool:
    return value is None or isinstance(value, str) or (type(value) is int)


class SchemaChecker:
    """Collects violations; thread-safe (readers of subprocess stdout run in threads)."""

    def __init__(self) -> None:
        self.failures: list[str] = []
        self.checked = 0
        self.cut: list[bytes] = []
        """Last lines cut short by a kill (see :meth:`unterminated`): not messages."""
        self._inbound_methods: dict[Any, str] = {}
        self._lock = threading.Lock()

    def observe_inbound(self, message: dict[str, Any]) -> None:
        """Note a message the client sent (so responses can be matched to methods)."""
        if isinstance(message, dict) and "method" in message and "id" in message:
            with self._lock:
                self._inbound_methods[_freeze(message["id"])] = message["method"]

    def unterminated(self, line: bytes, *, killed: bool) -> bool:
        """The output ended in ``line``, without its newline. After a kill the test made,
        it is a line the kill cut short: kept in :attr:`cut`, not checked (``True``).
        Otherwise it is a violation, and the line is still checked (``False``)."""
        if killed:
            self.cut.append(line)
            return True
        self._fail(f"stdout line without newline terminator: {line[:200]!r}")
        return False

    def check_line(self, line: bytes | str) -> dict[str, Any] | None:
        """Check one raw stdout line; returns the parsed message (or None if not JSON)."""
        text = line.decode() if isinstance(line, bytes) else line
        try:
            message = json.loads(text)
        except ValueError as exc:
            self._fail(f"stdout line is not JSON ({exc}): {text[:200]!r}")
            return None
        self.check(message)
        return message if isinstance(message, dict) else None

    def check(self, message: Any) -> None:
        self.checked += 1
        problems = self._problems(message)
        for p in problems:
            self._fail(f"{p}\n    message: {json.dumps(message)[:600]}")

    def _fail(self, text: str) -> None:
        with self._lock:
            self.failures.append(text)

    def _problems(self, m: Any) -> list[str]:
        if not isinstance(m, dict):
            return ["message is not a JSON object"]
        if m.get("jsonrpc") != "2.0":
            return ['"jsonrpc" is not "2.0"']
        sent, results, _, _ = _tables()
        if "method" in m:
            method = m["method"]
            extra = set(m) - {"jsonrpc", "method", "params", "id"}
            if extra:
                return [f"unexpected envelope keys {sorted(extra)}"]
            if "id" in m and not _valid_id(m["id"]):
                return [f"bad request id {m['id']!r}"]
            if method == "$/cancel_request":
                return validate_def("CancelRequestNotification", m.get("params"))
            if method.startswith("_"):
                return []
            def_name = sent.get(method)
            if def_name is None:
                return [f"agent sent unknown method {method!r}"]
            is_notification = def_name.endswith("Notification")
            if is_notification == ("id" in m):
                return [f"{method} sent as {'request' if 'id' in m else 'notification'}"]
            return validate_def(def_name, m.get("params"))
        if "id" not in m:
            return ["response without id"]
        if not _valid_id(m["id"]):
            return [f"bad response id {m['id']!r}"]
        if ("result" in m) == ("error" in m):
            return ["response must have exactly one of result/error"]
        if set(m) - {"jsonrpc", "id", "result", "error"}:
            return [
                f"unexpected envelope keys {sorted(set(m) - {'jsonrpc', 'id', 'result', 'error'})}"
            ]
        if "error" in m:
            errs = validate_def("Error", m["error"])
            if not errs and not m["error"].get("message"):
                errs = ["error message is empty"]
            return errs
        with self._lock:
            method = self._inbound_methods.get(_freeze(m["id"]))
        if method is None:
            return [f"result for an id the client never sent: {m['id']!r}"]
        def_name = results.get(method)
        if def_name is None:
            return [] if method.startswith("_") else [f"result for unknown method {method!r}"]
        return validate_def(def_name, m["result"])


def _freeze(value: Any) -> tuple[type, Any]:
    return (type(value), value)
