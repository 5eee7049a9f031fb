"""What the fake model server says about models and keys, in each API's own shapes (none
of these requests takes a scripted reply; they go to ``FakeLLMServer.model_requests``):

* ``GET .../models``: a compatible server's list (vLLM's shape, ``max_model_len``), from
  ``server.models`` (404 while ``None``, as a server without the route).
* ``GET .../models/<id>``: one model's description. With ``server.models`` a list, as
  a compatible server (the entry, or 404); while ``None``, as the vendor's own API, which
  knows the model: OpenAI's ``{"object": "model", ...}``, or Anthropic's
  ``{"type": "model", ...}`` when the request carries ``anthropic-version`` (its SDK
  always does).
* ``GET .../key``: OpenRouter's description of the key (``{"data": {...}}``).
* ``POST /api/show``: Ollama's model facts, from ``server.ollama``.

A ``Hang`` or an ``HttpError`` in ``server.models`` answers every ``/models`` route as
such, and in ``server.ollama`` that model's ``/api/show``. Answers are ``(status,
body)``; a status of ``None`` means "answer with ``body`` itself" (the caller renders a
``Hang`` or an ``HttpError``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

Answer = tuple[int | None, Any]


def is_model_facts(method: str, path: str) -> bool:
    """A request about models or the key, never a model request."""
    if method == "GET":
        return path.endswith(("/models", "/key")) or "/models/" in path
    return path.endswith("/api/show")


def model_facts(
    models: Any, ollama: dict[str, Any], method: str, path: str,
    headers: dict[str, str], body: Any,
) -> Answer:  # fmt: skip
    if path.endswith("/api/show"):
        name = str(body.get("model", "")) if isinstance(body, dict) else ""
        found = ollama.get(name) or ollama.get(f"{name}:latest")
        if found is None:
            return 404, {"error": f"model '{name}' not found"}
        return (200, found) if isinstance(found, dict) else (None, found)
    if path.endswith("/key"):
        key = {"label": "sk-or-v1-fak...", "limit": None, "usage": 0, "is_free_tier": False}
        return 200, {"data": key}
    if models is not None and not isinstance(models, list):
        return None, models
    if path.endswith("/models"):
        if models is None:
            return 404, {"detail": "Not Found"}
        return 200, {"object": "list", "data": [_served(m) for m in models]}
    model = unquote(path.rsplit("/models/", 1)[1])
    if isinstance(models, list):
        entry = next((m for m in models if m.get("id") == model), None)
        if entry is None:
            return 404, {"detail": "Not Found"}
        return 200, _served(entry)
    if "anthropic-version" in headers:
        return 200, {"type": "model", "id": model, "display_name": model,
                     "created_at": "2025-09-29T00:00:00Z"}  # fmt: skip
    return 200, {"id": model, "object": "model", "created": 0, "owned_by": "system"}


def _served(entry: dict[str, Any]) -> dict[str, Any]:
    """A compatible server's description of a model it serves (vLLM's shape)."""
    return {"object": "model", "created": 0, "owned_by": "vllm", **entry}
