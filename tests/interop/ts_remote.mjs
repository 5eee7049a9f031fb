#!/usr/bin/env node
// A real remote ACP client: the official TypeScript SDK's experimental transports
// (`@agentclientprotocol/sdk/experimental/http-client` createHttpStream and
// `/experimental/ws-client` createWebSocketStream, the latter over the `ws` package, as the
// SDK documents for Node) against `acp-agent serve`.
//
//   node ts_remote.mjs --url http://127.0.0.1:PORT/acp --transport http|ws --token T \
//        --workspace DIR [--scenario conversation|failover] [--raw-log FILE] \
//        [--control-dir DIR] [--step-timeout-ms N] [--timeout-ms N]
//
// Scenarios (the server's offline model plays a script the test wrote; every connection's
// model starts that script from its beginning)
//   conversation: a connection without the token is refused; connection A: initialize
//     (fs and terminal advertised: serve must not use them), session/new, a streamed prompt,
//     a write_file whose permission question is answered allow_once (the file is written
//     on the server), a prompt cancelled by session/cancel, one cancelled by
//     $/cancel_request; connection B: initialize, session/load of A's session refused while
//     A holds it; A disconnects in the middle of a turn; B reattaches with session/load
//     (the conversation replayed) and prompts again.
//   failover (through a balancer, HTTP profile, one cookie store kept across reconnects):
//     initialize, session/new, one turn; a second turn that hangs; the test kills the
//     replica (it reads `cookie` and `hanging` from --control-dir and writes `killed`);
//     the client reconnects with the same cookies, lands on the other replica,
//     session/load replays the completed turn, and a new prompt works.
//
// Every raw message in both directions (POST bodies, the initialize response, each SSE
// event; each WebSocket frame) goes to --raw-log as {"seq", "conn", "dir", "line"} in the
// order seen, for a schema checker per connection. A JSON summary goes to stdout; the exit
// status is non-zero on any failure.

import fs from "node:fs";
import path from "node:path";
import * as acp from "@agentclientprotocol/sdk/unstable";
import { createHttpStream, MemoryAcpCookieStore } from "@agentclientprotocol/sdk/experimental/http-client";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";
import WebSocket from "ws";

function parseArgs(argv) {
  const o = { scenario: "conversation", transport: "http", timeoutMs: 60000, stepTimeoutMs: 20000 };
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, "").replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    o[key] = argv[i + 1];
  }
  o.timeoutMs = Number(o.timeoutMs);
  o.stepTimeoutMs = Number(o.stepTimeoutMs);
  return o;
}
const opts = parseArgs(process.argv.slice(2));
const errors = [];
const fail = (msg) => errors.push(String(msg));
const check = (cond, msg) => (cond ? true : (fail(msg), false));
const summary = { ok: false, transport: opts.transport, errors, sdkErrors: [], http: [], raw: {} };
const origError = console.error.bind(console);
console.error = (...args) => {
  summary.sdkErrors.push(args.map(String).join(" "));
  origError(...args);
};

// ------------------------------------------------------------------ the raw wire

let seq = 0;
const startedAt = Date.now();
if (opts.rawLog) fs.writeFileSync(opts.rawLog, "");
function record(conn, dir, line) {
  const text = typeof line === "string" ? line : Buffer.from(line).toString("utf8");
  summary.raw[conn] = (summary.raw[conn] ?? 0) + (dir === "agent->client" ? 1 : 0);
  if (opts.rawLog) fs.appendFileSync(opts.rawLog, JSON.stringify({ seq: seq++, conn, dir, line: text }) + "\n");
}

function sseTap(conn) {
  const decoder = new TextDecoder();
  let buffer = "";
  let data = [];
  return new TransformStream({
    transform(chunk, controller) {
      buffer += decoder.decode(chunk, { stream: true });
      let nl;
      while ((nl = buffer.indexOf("\n")) !== -1) {
        const line = buffer.slice(0, nl).replace(/\r$/, "");
        buffer = buffer.slice(nl + 1);
        if (line === "") {
          if (data.length) record(conn, "agent->client", data.join("\n"));
          data = [];
        } else if (line.startsWith("data:")) {
          data.push(line.slice(5).replace(/^ /, ""));
        }
      }
      controller.enqueue(chunk);
    },
  });
}

function tappedFetch(conn) {
  return async (url, init = {}) => {
    if (typeof init.body === "string") record(conn, "client->agent", init.body);
    const sent = Date.now();
    const res = await fetch(url, init);
    const type = res.headers.get("content-type") ?? "";
    const session = new Headers(init.headers).get("acp-session-id");
    summary.http.push({ conn, method: init.method, status: res.status, session: session !== null,
      sentMs: sent - startedAt, ms: Date.now() - sent,
      connectionId: res.headers.get("acp-connection-id") !== null });
    if (res.ok && type.startsWith("application/json")) {
      const text = await res.text();
      record(conn, "agent->client", text);
      return new Response(text, { status: res.status, statusText: res.statusText, headers: res.headers });
    }
    if (res.ok && type.startsWith("text/event-stream") && res.body) {
      return new Response(res.body.pipeThrough(sseTap(conn)),
        { status: res.status, statusText: res.statusText, headers: res.headers });
    }
    return res;
  };
}

function tappedWebSocket(conn) {
  return class extends WebSocket {
    constructor(url, protocols, options) {
      super(url, protocols, options);
      this.on("upgrade", (res) => {
        summary.http.push({ conn, method: "GET", status: res.statusCode,
          connectionId: Boolean(res.headers["acp-connection-id"]) });
      });
      this.on("unexpected-response", (req, res) => {
        summary.http.push({ conn, method: "GET", status: res.statusCode, connectionId: false });
        this.emit("error", new Error(`Unexpected server response: ${res.statusCode}`));
        req.destroy();
      });
      this.on("message", (data, isBinary) => { if (!isBinary) record(conn, "agent->client", data); });
    }
    send(data, ...rest) {
      record(conn, "client->agent", data);
      return super.send(data, ...rest);
    }
  };
}

function openStream(conn, { token = opts.token, cookieStore } = {}) {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  if (opts.transport === "ws") {
    return createWebSocketStream(opts.url.replace(/^http/, "ws"),
      { headers, WebSocket: tappedWebSocket(conn), cookieStore });
  }
  return createHttpStream(opts.url, { headers, fetch: tappedFetch(conn), cookieStore });
}

// ------------------------------------------------------------------ a client app

const updates = []; // {conn, params}
const waiters = new Set();
const clientRequests = [];
function notifyWaiters() {
  for (const w of [...waiters]) if (w.pred()) { waiters.delete(w); clearTimeout(w.timer); w.resolve(); }
}
function waitFor(pred, what, ms = opts.stepTimeoutMs) {
  if (pred()) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const w = { pred, resolve };
    w.timer = setTimeout(() => { waiters.delete(w); reject(new Error(`timed out waiting for ${what}`)); }, ms);
    waiters.add(w);
  });
}
function withTimeout(promise, what, ms = opts.stepTimeoutMs) {
  let timer;
  return Promise.race([promise, new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out: ${what}`)), ms);
  })]).finally(() => clearTimeout(timer));
}
function makeApp(conn) {
  return acp.client({ name: `acp-agent-remote-${conn}` })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      updates.push({ conn, params });
      notifyWaiters();
    })
    .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
      clientRequests.push({ conn, method: "session/request_permission", toolCallId: params.toolCall?.toolCallId });
      const allow = params.options.find((o) => o.kind === "allow_once");
      notifyWaiters();
      return { outcome: { outcome: "selected", optionId: allow.optionId } };
    })
    .onRequest("*", ({ method }) => {
      clientRequests.push({ conn, method }); // fs/*, terminal/*: serve must not call them
      throw acp.RequestError.methodNotFound(method);
    });
}
const CAPS = { fs: { readTextFile: true, writeTextFile: true }, terminal: true, auth: { terminal: true } };
const textOf = (conn, sid, from = 0, kind = "agent_message_chunk") => updates.slice(from)
  .filter((u) => u.conn === conn && u.params.sessionId === sid && u.params.update?.sessionUpdate === kind)
  .map((u) => u.params.update.content?.text ?? "").join("");
const errorOf = (err) => ({ code: err?.code ?? null, message: String(err?.message ?? err),
  status: err?.data?.status ?? null, body: err?.data?.body ?? null });

async function initialize(agent) {
  return agent.request(acp.methods.agent.initialize,
    { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: CAPS, clientInfo: { name: "remote", version: "1" } });
}

async function prompt(agent, conn, sid, text, { cancel } = {}) {
  const from = updates.length;
  const controller = new AbortController();
  const pending = agent.request(acp.methods.agent.session.prompt,
    { sessionId: sid, prompt: [{ type: "text", text }] }, { cancellationSignal: controller.signal });
  pending.catch(() => {});
  if (cancel) {
    await waitFor(() => textOf(conn, sid, from).startsWith("partial"), `the first chunk of "${text}"`);
    if (cancel === "session/cancel") await agent.notify(acp.methods.agent.session.cancel, { sessionId: sid });
    else controller.abort();
  }
  const response = await withTimeout(pending, `session/prompt "${text}"`);
  return { stopReason: response.stopReason, text: textOf(conn, sid, from) };
}

// ------------------------------------------------------------------ scenarios

async function refusedWithoutToken(out) {
  try {
    await makeApp("noauth").connectWith(openStream("noauth", { token: "" }), (agent) => initialize(agent));
    fail("a connection without the token was accepted");
  } catch (err) {
    out.noToken = errorOf(err);
  }
}

async function conversation() {
  const out = {};
  summary.conversation = out;
  await refusedWithoutToken(out);
  let sid;
  await makeApp("B").connectWith(openStream("B"), async (b) => {
    await makeApp("A").connectWith(openStream("A"), async (a) => {
      const init = await initialize(a);
      out.loadSession = init.agentCapabilities?.loadSession ?? null;
      out.authMethods = (init.authMethods ?? []).map((m) => m.id);
      sid = (await a.request(acp.methods.agent.session.new, { cwd: opts.workspace, mcpServers: [] })).sessionId;
      out.sessionId = sid;
      out.hello = await prompt(a, "A", sid, "hello");
      out.write = await prompt(a, "A", sid, "write the note");
      out.cancelled = await prompt(a, "A", sid, "cancel me", { cancel: "session/cancel" });
      out.cancelRequest = await prompt(a, "A", sid, "cancel this request", { cancel: "$/cancel_request" });
      await initialize(b);
      try {
        await b.request(acp.methods.agent.session.load, { sessionId: sid, cwd: opts.workspace, mcpServers: [] });
        fail("B loaded the session A holds");
      } catch (err) {
        out.refused = errorOf(err);
      }
      const from = updates.length;
      const hanging = a.request(acp.methods.agent.session.prompt,
        { sessionId: sid, prompt: [{ type: "text", text: "left hanging" }] });
      hanging.catch(() => {});
      await waitFor(() => textOf("A", sid, from).startsWith("partial"), "the first chunk of the last turn");
    }); // A goes away mid-turn
    const from = updates.length;
    await b.request(acp.methods.agent.session.load, { sessionId: sid, cwd: opts.workspace, mcpServers: [] });
    const replayed = updates.slice(from).filter((u) => u.conn === "B" && u.params.sessionId === sid);
    out.replayedUser = replayed.filter((u) => u.params.update.sessionUpdate === "user_message_chunk")
      .map((u) => u.params.update.content?.text ?? "");
    out.replayedAgent = textOf("B", sid, from);
    out.replayedKinds = [...new Set(replayed.map((u) => u.params.update.sessionUpdate))];
    out.after = await prompt(b, "B", sid, "are you there?");
  });
  out.clientRequests = clientRequests;
}

// The test drives the kill: files in --control-dir are the handshake.
const control = (name) => path.join(opts.controlDir ?? ".", name);
async function waitForFile(name) {
  const deadline = Date.now() + opts.stepTimeoutMs;
  while (!fs.existsSync(control(name))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${name}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function failover() {
  const out = {};
  summary.failover = out;
  const cookieStore = new MemoryAcpCookieStore();
  let sid;
  try {
    await makeApp("A").connectWith(openStream("A", { cookieStore }), async (a) => {
      await initialize(a);
      sid = (await a.request(acp.methods.agent.session.new, { cwd: opts.workspace, mcpServers: [] })).sessionId;
      out.sessionId = sid;
      out.first = await prompt(a, "A", sid, "hello");
      out.cookie = cookieStore.cookieHeader() ?? null;
      fs.writeFileSync(control("cookie"), out.cookie ?? "");
      const from = updates.length;
      const hanging = a.request(acp.methods.agent.session.prompt,
        { sessionId: sid, prompt: [{ type: "text", text: "the replica dies now" }] });
      hanging.catch((err) => { out.hangingError = errorOf(err); });
      await waitFor(() => textOf("A", sid, from).startsWith("partial"), "the first chunk of the second turn");
      fs.writeFileSync(control("hanging"), "");
      await waitForFile("killed");
      await hanging.catch(() => {});
    });
  } catch (err) {
    out.lost = errorOf(err); // the connection died with its replica
  }
  await makeApp("C").connectWith(openStream("C", { cookieStore }), async (c) => {
    await initialize(c);
    const from = updates.length;
    await c.request(acp.methods.agent.session.load, { sessionId: sid, cwd: opts.workspace, mcpServers: [] });
    // Through a balancer the replay (on the session's stream) and the response (on the
    // connection's) cross it on two TCP connections that it relays independently: the
    // agent hands the replay to its socket before the response, but on a busy machine the
    // response may reach the client first. The replay still comes, whole: wait for it.
    await waitFor(() => textOf("C", sid, from).startsWith("Hello from a replica!"), "the replay");
    const replayed = updates.slice(from).filter((u) => u.conn === "C" && u.params.sessionId === sid);
    out.replayedUser = replayed.filter((u) => u.params.update.sessionUpdate === "user_message_chunk")
      .map((u) => u.params.update.content?.text ?? "");
    out.replayedAgent = textOf("C", sid, from);
    out.cookieAfter = cookieStore.cookieHeader() ?? null;
    out.after = await prompt(c, "C", sid, "still there?");
  });
}

// ------------------------------------------------------------------ main

const watchdog = setTimeout(() => { fail(`watchdog: not done within ${opts.timeoutMs} ms`); done(); }, opts.timeoutMs);
function done() {
  clearTimeout(watchdog);
  summary.ok = errors.length === 0;
  process.stdout.write(JSON.stringify(summary) + "\n");
  process.exit(summary.ok ? 0 : 1);
}
try {
  if (opts.scenario === "failover") await failover();
  else await conversation();
} catch (err) {
  fail(`scenario aborted: ${err?.stack ?? err}`);
}
done();
