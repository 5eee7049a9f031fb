# acp-agent in a container. Editors start it with `docker run -i --rm ...`:
# stdin/stdout carry the protocol, so keep -i and never allocate a TTY (-t).
# Mount the project at the same path as on the host (-v "$PWD:$PWD" -w "$PWD"): the editor
# sends host paths in session/new. Pass keys by name only (-e OPENAI_API_KEY).
# To write in a bind-mounted project owned by you, run as you: --user "$(id -u):$(id -g)"
# (the image's user is 10001; the state directory below takes any user).
#
# As a service reached over the network (`acp-agent serve`, README "Over the network"):
#   docker run -d --name acp-agent -p 8765:8765 -e ACP_AGENT_SERVE_TOKEN \
#     -v acp-agent-state:/home/agent/.local/state -v /srv/project:/srv/project \
#     acp-agent serve --listen 0.0.0.0:8765
# Clients send `Authorization: Bearer $ACP_AGENT_SERVE_TOKEN`; a session's cwd is a path in
# the container (/srv/project). The health check below probes /healthz when the container
# serves, and passes for a stdio agent; the named volume keeps sessions across runs and
# can be shared by several replicas.
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

RUN groupadd --gid 10001 agent && useradd --create-home --uid 10001 --gid 10001 agent
# Sessions live here; a named volume mounted on it (-v acp-agent-state:/home/agent/.local/state)
# keeps them across runs. Sticky and open to all (like /tmp) so that the image's user and
# any --user can each keep their own acp-agent/ in it (made 0700 by the agent).
ENV XDG_STATE_HOME=/home/agent/.local/state
RUN mkdir -p "$XDG_STATE_HOME" && chmod 1777 "$XDG_STATE_HOME"
# Numeric, so that runAsNonRoot (Kubernetes) can check it without the image's passwd.
USER 10001:10001
WORKDIR /workspace

EXPOSE 8765
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-m", "acp_agent.transports.health"]
ENTRYPOINT ["acp-agent"]
