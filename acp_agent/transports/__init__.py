"""``acp-agent serve``: the agent reached over the network, at one endpoint ``/acp``.

The transport is the RFD "Streamable HTTP & WebSocket Transport" (agent-client-protocol
``docs/rfds/streamable-http-websocket-transport.mdx``, revision of 2026-07-02) as the
official TypeScript SDK 2.4.0 speaks it: its clients ``experimental/http-client``
(``createHttpStream``) and ``experimental/ws-client`` (``createWebSocketStream``) decide
every wire detail the RFD leaves open, and its ``experimental/server`` settles the rest.
What they do:

* **initialize**: the first message, ``POST``ed without ``Acp-Connection-Id``; answered
  ``200`` with the JSON-RPC response as the body and ``Acp-Connection-Id`` in a header
  (the client fails without it). Anything else without the header is ``400``.
* **POST** (``Content-Type: application/json``, else ``415``): one message, answered
  ``202`` with no body; the answer comes on a stream. The client sends
  ``Acp-Session-Id`` with every message whose ``params`` carry a ``sessionId`` (and
  with its answer to a request that came on a session's stream); the server asks it for
  the session methods too and checks it against the body (``400`` when missing or
  different). A batch (a JSON array) is refused: ``501`` as the RFD says, with the
  single ``-32600`` error (``id: null``) the SDK's own server sends.
* **GET** with ``Accept: text/event-stream`` (else ``406``): ``Acp-Connection-Id`` alone
  is the connection's stream (responses to ``session/new``, ``session/load``, and the rest
  not tied to a session); with ``Acp-Session-Id``, that session's stream (its updates,
  its permission questions, the responses to its requests). The client opens the
  connection's stream right after ``initialize``, a session's stream as soon as it sees
  the session's id (in a response, or *before* it POSTs ``session/load`` of it), so a
  session stream is accepted for any id (not ``404`` as the RFD's routing table has it:
  the SDK would tear the whole connection down) and keeps what arrives before its
  reader. A second reader of the same stream is ``409``. Events are ``data: <json>``
  and a blank line, one message each; a quiet stream gets a ``:`` comment every 15 s.
* **409** on a session's POST or stream means to the client "this session is gone
  here until ``session/load`` or ``session/resume``": the answer when another
  connection holds the session. **401, 403, 404, 410** on a POST mean the whole
  connection is unusable (the client closes it); any other status fails just that
  request, with ``{status, body}`` as the JSON-RPC error's data.
* **DELETE** with ``Acp-Connection-Id``: the connection ends (``202``); the client sends
  it when it closes, or when a stream failed.
* **WebSocket**: ``GET /acp`` with ``Upgrade: websocket``; ``101`` carries
  ``Acp-Connection-Id``; then one JSON-RPC message per text frame, ``initialize`` first.
  Node clients pass ``headers`` (so ``Authorization``) through the ``ws`` package's
  constructor; browsers' ``WebSocket`` sends none.
* **Cookies**: both clients keep ``Set-Cookie`` and send it back for the connection's
  life (and across reconnects with a caller's ``cookieStore``): a balancer's affinity
  cookie (HAProxy ``cookie ... insert``) brings a client back to its replica.
* **Reconnect** is the caller's: a new connection, ``initialize``, then ``session/load``
  of the saved ``sessionId`` (messages sent while disconnected are not replayed).

Modules: ``command`` (the command line, hypercorn), ``app`` (the ASGI gate: auth,
origins, ``/healthz``, idle reaping), ``http`` and ``streams`` (Streamable HTTP), ``ws``
(WebSocket), ``lines`` (the in-process pipes), ``peer`` (one connection's agent and the
rules of ``serve``), ``hub`` (what connections share), ``holds`` (who holds which
session), ``health`` (the container's health check). Nothing here is imported on the way
to a stdio ``initialize``.
"""
