"""Ollama's OpenAI-compatible endpoint on this machine (``--model ollama:<model>``).

No key. The endpoint is ``http://127.0.0.1:11434/v1`` unless ``[ollama] base-url``,
``--base-url`` or ``OLLAMA_BASE_URL`` says otherwise.
"""

from __future__ import annotations

from .openai import SPEC as OPENAI
from .registry import ProviderSpec

SPEC = ProviderSpec(
    name="ollama",
    example="qwen2.5-coder",
    title="Ollama",
    build=OPENAI.build,
    model_info=OPENAI.model_info,
    base_url_env="OLLAMA_BASE_URL",
    default_base_url="http://127.0.0.1:11434/v1",
    apis=OPENAI.apis,
    warm=OPENAI.warm,
    unreachable_hint="is Ollama running? Start it with `ollama serve`",
)
