"""``ask_user``: a structured question to the user, as an ACP form elicitation.

The model sends a message and a flat form schema (the restricted JSON Schema of
``ElicitationSchema``: string, number, integer, boolean and multi-select fields); the
schema is checked field by field (``prepare``, before the call runs), with errors the
model can act on, before anything reaches the editor. The editor shows the form
(``elicitation/create``, form mode, scoped to the session and this tool call) and
answers ``accept`` with the values, ``decline`` or ``cancel``: that answer is the tool's
result. Accepted values are checked again against the question.

The tool is offered only to a client that advertised form elicitation
(``clientCapabilities.elicitation.form``; ``elicitation: {}`` advertises no mode): see
``handlers.turns.Turns.tools_for``. Without it the model asks in its answer and ends the turn.
A cancel of the turn abandons the request, which the connection passes on as
``$/cancel_request`` (``elicitation/complete`` is for URL mode only).
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

from msgspec import Meta

from ..errors import RemoteError, ToolError
from ..protocol import UNSET
from ..protocol import types as t
from ._form import FIELD_SCHEMA, check_answer, form_schema, plain
from .base import Arguments, BuiltinTool, CallInfo, Preview, ToolContext, ToolKind, ToolOutput

NAME = "ask_user"

_SCHEMA_DOC = (
    "The form: a flat JSON Schema object. `properties` maps each field name to one field: "
    '{"type": "string"} (optionally `enum` or `oneOf` [{"const", "title"}] for a single '
    "choice, `minLength`, `maxLength`, `pattern`, `format`: email|uri|date|date-time), "
    '{"type": "number"|"integer"} (`minimum`, `maximum`), {"type": "boolean"}, or '
    '{"type": "array", "items": {"type": "string", "enum": [...]}} for a multiple choice '
    "(`minItems`, `maxItems`). Every field may have `title`, `description` and `default`. "
    "`required` lists the fields that must be answered. No nested objects."
)


class AskUserArgs(Arguments):
    message: Annotated[
        str, Meta(min_length=1, description="The question, shown above the form: what and why.")
    ]
    schema: Annotated[
        dict[str, Any],
        Meta(
            description=_SCHEMA_DOC,
            extra_json_schema={
                "properties": {
                    "title": {"type": "string"},
                    "description": {"type": "string"},
                    "properties": {
                        "type": "object",
                        "additionalProperties": FIELD_SCHEMA,
                        "minProperties": 1,
                    },
                    "required": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["properties"],
            },
        ),
    ]


class AskUser(BuiltinTool[AskUserArgs]):
    """The ``ask_user`` tool (no permission needed: the user answers it or not)."""

    name = NAME
    kind: ToolKind = "think"  # part of working out what to do (offered in plan mode too)
    arguments = AskUserArgs
    description = (
        "Ask the user a structured question in the editor: a form with choices or values "
        "(pick one of several approaches, confirm a name, choose which items to include). "
        "Use it when the task depends on the user's decision and the code cannot settle "
        "it; the user's answer, or their refusal, is the result. Ask one focused question "
        "with few fields; prefer choices (`enum`) over free text. Never ask for secrets "
        "(passwords, API keys, tokens, private keys, payment data)."
    )

    def describe(self, args: AskUserArgs, ctx: ToolContext) -> CallInfo:
        first = next((ln.strip() for ln in args.message.splitlines() if ln.strip()), "")
        return CallInfo(f"Ask the user: {_clip(first, 80)}" if first else "Ask the user")

    async def prepare(self, args: AskUserArgs, ctx: ToolContext) -> Preview:
        """The form, checked before the call runs: a schema ACP does not allow fails the
        call at once, with an error naming the field."""
        message = args.message.strip()
        if not message:
            raise ToolError("argument 'message' must not be blank")
        return Preview(state=form_schema(args.schema, message))

    async def run(self, args: AskUserArgs, ctx: ToolContext) -> ToolOutput:
        message = args.message.strip()
        schema = ctx.prepared
        if not isinstance(schema, t.ElicitationSchema):
            schema = (await self.prepare(args, ctx)).state
        request = t.ElicitationFormMode(
            message=message,
            requested_schema=schema,
            session_id=ctx.session_id,
            tool_call_id=ctx.tool_call_id,
        )
        try:
            raw = await ctx.client.call("elicitation/create", request, dict[str, Any])
        except RemoteError as exc:
            raise ToolError(
                f"The editor could not show the question ({exc.message}). Ask in your "
                "answer instead and end your turn."
            ) from None
        return _outcome(raw, schema)


def _outcome(raw: dict[str, Any], schema: t.ElicitationSchema) -> ToolOutput:
    action = raw.get("action")
    if action == "accept":
        answer = check_answer(raw.get("content"), schema)  # ToolError if it does not fit
        if not answer:
            text = "The user submitted the form without filling in any field."
            shown = "Submitted without answers."
        else:
            text = "The user answered:\n" + json.dumps(answer, ensure_ascii=False, indent=1)
            shown = "\n".join(f"**{_label(schema, k)}**: {plain(v)}" for k, v in answer.items())
        return _output(text, shown, {"action": "accept", "content": answer})
    if action == "decline":
        text = "The user declined to answer this question."
        return _output(text, "Declined.", {"action": "decline"})
    if action == "cancel":
        text = "The user dismissed the question without answering."
        return _output(text, "Dismissed.", {"action": "cancel"})
    raise ToolError(
        f"The editor answered with an action this agent does not know ({action!r}); "
        "the question is unanswered."
    )


def _output(text: str, shown: str, raw: dict[str, Any]) -> ToolOutput:
    return ToolOutput(
        text=text, content=[t.Content(content=t.TextContent(text=shown))], raw_output=raw
    )


def _label(schema: t.ElicitationSchema, name: str) -> str:
    props = schema.properties if schema.properties is not UNSET else {}
    title = getattr(props.get(name), "title", None)
    return title if isinstance(title, str) and title else name


def _clip(text: str, limit: int) -> str:
    text = re.sub(r"\s+", " ", text)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
