# acp-agent in a container. Editors start it with `docker run -i --rm ...`:
# stdin/stdout carry the protocol, so keep -i and never allocate a TTY (-t).
# Mount the project at the same path as on the host (-v "$PWD:$PWD" -w "$PWD"): the editor
# sends host paths in session/new. Pass keys by name only (-e OPENAI_API_KEY).
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md ./
COPY acp_agent ./acp_agent
# Runtime dependencies only (no dev extras); the source tree is removed afterwards.
RUN pip install . && rm -rf /src

RUN useradd --create-home --uid 10001 agent
USER agent
# Sessions live here; created as the agent user so a named volume mounted on it
# (-v acp-agent-state:/home/agent/.local/state) is writable and keeps them across runs.
ENV XDG_STATE_HOME=/home/agent/.local/state
RUN mkdir -p "$XDG_STATE_HOME"
WORKDIR /workspace

ENTRYPOINT ["acp-agent"]
