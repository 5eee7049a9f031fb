"""The four provider routes an agent subprocess can take to the fake model server, each
through its real SDK: OpenAI Chat Completions, the OpenAI Responses API (a GPT-5 model),
Anthropic Messages, and an OpenAI-compatible server (Ollama's family). A test runs the
same scenario on each and reads what each request carried in the route's own shape.

The Responses route is OpenAI's own as the agent sees it (``http://api.openai.com/v1``:
the Responses API chosen by ``api = "auto"``, ``prompt_cache_key``, custom tools), reached
through ``HTTP_PROXY``: the fake server answers the proxy's requests (absolute URLs), so
nothing leaves the machine."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .fakes.llm_server import FakeLLMServer
from .harness import AgentProcess
from .schema_check import SchemaChecker

#: The official endpoint, as the agent is told it (reached through the fake as a proxy).
OFFICIAL = "http://api.openai.com/v1"


@dataclass(frozen=True)
class Route:
    name: str
    model: str
    config: str = ""
    """The agent's config file (TOML)."""
    official: bool = False
    """OpenAI's own endpoint (through the fake as an HTTP proxy)."""
    wire: str = ""
    """The request shape: ``chat``, ``responses``, ``anthropic`` (default: the name)."""

    @property
    def shape(self) -> str:
        return self.wire or ("chat" if self.name == "compatible" else self.name)

    def url(self, server: FakeLLMServer) -> str:
        if self.official:
            return OFFICIAL
        return server.url if self.model.startswith("anthropic:") else server.openai_url

    def agent(self, checker: SchemaChecker, state_dir: str, server: FakeLLMServer,
              tmp_path: Path, *extra: str, env: dict[str, str] | None = None
              ) -> AgentProcess:  # fmt: skip
        config = tmp_path / f"{self.name}.toml"
        config.write_text(self.config)
        keys = {"OPENAI_API_KEY": "test-key", "ANTHROPIC_API_KEY": "test-key"}
        if self.official:
            keys.update(HTTP_PROXY=server.url, http_proxy=server.url, NO_PROXY="", no_proxy="")
        return AgentProcess(checker, "--state-dir", state_dir, "--model", self.model,
                            "--base-url", self.url(server), "--config", str(config), *extra,
                            env={**keys, **(env or {})})  # fmt: skip

    # ------------------------------------------------------------------ reading a request

    def tools(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The tools offered, each as ``{"name", "description"}`` (and what else it has)."""
        out = []
        for tool in body.get("tools") or []:
            if self.shape == "chat":
                fn = tool["function"]
                out.append({"name": fn["name"], "description": fn["description"], **fn})
            else:
                out.append(tool)
        return out

    def tool_names(self, body: dict[str, Any]) -> list[str]:
        return [t["name"] for t in self.tools(body)]

    def system(self, body: dict[str, Any]) -> str:
        if self.shape == "responses":
            return str(body["instructions"])
        if self.shape == "anthropic":
            system = body["system"]
            return system if isinstance(system, str) else "".join(b["text"] for b in system)
        first = body["messages"][0]
        assert first["role"] == "system"
        content = first["content"]
        return content if isinstance(content, str) else "".join(p["text"] for p in content)

    def user_texts(self, body: dict[str, Any]) -> list[list[str]]:
        """Each user message's text parts, in order (tool results are not user texts)."""
        items = body["input"] if self.shape == "responses" else body["messages"]
        out: list[list[str]] = []
        for item in items:
            if item.get("role") != "user":
                continue
            content = item["content"]
            if isinstance(content, str):
                out.append([content])
                continue
            texts = [p["text"] for p in content if p.get("type") in ("text", "input_text")]
            if texts:
                out.append(texts)
        return out

    def tool_results(self, body: dict[str, Any]) -> list[str]:
        """The text of each tool result, in order."""
        if self.shape == "responses":
            return [str(i["output"]) for i in body["input"]
                    if i.get("type") in ("function_call_output", "custom_tool_call_output")]
        if self.shape == "anthropic":
            out = []
            for m in body["messages"]:
                for b in m["content"] if isinstance(m["content"], list) else []:
                    if b.get("type") == "tool_result":
                        inner = b["content"]
                        out.append(inner if isinstance(inner, str)
                                   else "".join(x.get("text", "") for x in inner))
            return out
        return [str(m["content"]) for m in body["messages"] if m.get("role") == "tool"]


CHAT = Route("chat", "openai:gpt-4.1")
RESPONSES = Route("responses", "openai:gpt-5", official=True)
ANTHROPIC = Route("anthropic", "anthropic:claude-sonnet-4-5")
COMPATIBLE = Route("compatible", "ollama:qwen3-coder")
ROUTES = [CHAT, RESPONSES, ANTHROPIC, COMPATIBLE]
#: A GPT-5 model over Chat Completions (a compatible server or a proxy in front of
#: OpenAI): apply_patch as a function taking the patch.
GPT5_CHAT = Route("gpt5-chat", "openai:gpt-5", '[openai]\napi = "chat-completions"\n',
                  wire="chat")


def arguments(value: dict[str, Any]) -> str:
    return json.dumps(value)
