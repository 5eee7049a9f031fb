#!/usr/bin/env node
// Subagents through the official TypeScript SDK client (@agentclientprotocol/sdk, the
// `/unstable` entrypoint, so subagent_update and session_message are parsed, not dropped).
//
//   node ts_subagents.mjs [--raw-log FILE] [--timeout-ms N] [--step-timeout-ms N] \
//        [--] <agent command...>
//
// The client advertises `subagents: {}` and `elicitation: {form: {}}` and runs these turns
// on a scripted offline model (the script is written here and passed in
// ACP_AGENT_OFFLINE_SCRIPT):
//   1. "parallel": the parent spawns two children at once; each runs `echo hi`, which asks
//      permission under the child's session id (answered allow_once), then answers.
//   2. "cancel-child": one child that hangs; session/cancel with the CHILD's id once its
//      first chunk arrives; the parent goes on and ends its turn.
//   3. "cancel-parent": one child that hangs; session/cancel with the parent's id; the
//      prompt answers "cancelled".
//   4. "ask": the parent calls ask_user; the SDK parses the elicitation/create (form mode)
//      and the handler accepts with content.
//   5. "child-ask": a child calls ask_user: the question comes under the child's id.
//   6. "long": a child answers ~6 kB: its answer reaches the parent as a session_message
//      and several session_message_chunks, which the client folds back together.
//   7. "ask-cancel": the parent asks, the handler holds the form open; session/cancel:
//      the SDK aborts the handler on the agent's $/cancel_request; the turn is cancelled.
//   8. session/load of the parent: the children's transcripts come back under their ids.
// Checks, on the raw wire order: a child is announced (subagent_update on its parent)
// before any session/update or request names it; its last state is idle with a stop
// reason; the SDK delivered every session/update and reported no errors. Every raw line
// goes to --raw-log as {"seq", "dir", "line"} for the schema checker; a JSON summary goes
// to stdout; the exit status is non-zero on any failure.

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import * as acp from "@agentclientprotocol/sdk/unstable";
import { clientOptions, runScenario, spawnAgent, tappedStreams, waiters } from "./wire_tap.mjs";

const opts = clientOptions(process.argv.slice(2), "ts_subagents.mjs");

const errors = [];
const check = (cond, msg) => {
  if (!cond) errors.push(String(msg));
  return Boolean(cond);
};
const sdkErrors = [];
const origConsoleError = console.error.bind(console);
console.error = (...args) => {
  sdkErrors.push(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" "));
  origConsoleError(...args);
};

const summary = {
  ok: false,
  sdkVersion: JSON.parse(
    fs.readFileSync(
      new URL("./node_modules/@agentclientprotocol/sdk/package.json", import.meta.url),
      "utf8",
    ),
  ).version,
  errors,
  sdkErrors,
  sessionId: null,
  turns: [],
  children: {},
  updateCounts: {},
  permissionRequests: [],
  elicitations: [],
  elicitationsAborted: 0,
  messages: {},
  replay: null,
  raw: { agentToClient: 0, clientToAgent: 0 },
  agentExit: null,
  stderrTail: "",
};

// ------------------------------------------------------------------ raw tap

let seq = 0;
const raw = []; // {seq, dir, msg} in wire order
if (opts.rawLog) fs.writeFileSync(opts.rawLog, "");
function record(dir, line, unterminated = false) {
  const entry = { seq: seq++, dir, line, ...(unterminated ? { unterminated: true } : {}) };
  let msg = null;
  try {
    msg = JSON.parse(line);
  } catch {
    // reported by the schema checker on the pytest side
  }
  raw.push({ seq: entry.seq, dir, msg });
  summary.raw[dir === "agent->client" ? "agentToClient" : "clientToAgent"] += 1;
  if (opts.rawLog) fs.appendFileSync(opts.rawLog, JSON.stringify(entry) + "\n");
}

// ------------------------------------------------------------------ the agent

const tmpBase = fs.mkdtempSync(path.join(os.tmpdir(), "acp-ts-subagents-"));
const workspace = path.join(tmpBase, "ws");
fs.mkdirSync(workspace);
const spawnCall = (title, prompt) => ({
  tool_call: {
    name: "spawn_agent",
    arguments: { title, description: `The ${title.toLowerCase()} helper.`, prompt },
  },
});
const echo = { tool_call: { name: "run_command", arguments: { command: "echo hi" } } };
const askUser = {
  tool_call: {
    name: "ask_user",
    arguments: {
      message: "Which strategy?",
      schema: {
        properties: {
          strategy: { type: "string", title: "Strategy", enum: ["safe", "bold"] },
          files: { type: "array", items: { anyOf: [{ const: "a", title: "A" }, { const: "b", title: "B" }] } },
        },
        required: ["strategy"],
      },
    },
  },
};
const LONG = Array.from({ length: 60 }, (_, i) => `Line ${i}: ` + Array(12).fill("finding").join(" ")).join("\n");
summary.long = LONG;
const SCRIPT = [
  // turn "parallel": parent, then each child's two requests (the children are alike, so
  // whichever asks first may take either response), then the parent's answer
  [spawnCall("Alpha", "Run echo."), spawnCall("Beta", "Run echo.")],
  [echo],
  [echo],
  [{ text: "child done" }],
  [{ text: "child done" }],
  [{ text: "Both children are done." }],
  // turn "cancel-child"
  [spawnCall("Slow", "Take your time.")],
  [{ text: "working " }, { hang: true }],
  [{ text: "Carrying on without it." }],
  // turn "cancel-parent"
  [spawnCall("Stuck", "Wait forever.")],
  [{ text: "working " }, { hang: true }],
  // turn "ask"
  [askUser],
  [{ text: "Going bold." }],
  // turn "child-ask": parent, child, child, parent
  [spawnCall("Asker", "Ask the user.")],
  [askUser],
  [{ text: "The user chose bold." }],
  [{ text: "Asked." }],
  // turn "long": parent, child, parent
  [spawnCall("Writer", "Write a long report.")],
  [{ text: LONG }],
  [{ text: "Report received." }],
  // turn "ask-cancel"
  [askUser],
];
const scriptPath = path.join(tmpBase, "script.json");
fs.writeFileSync(scriptPath, JSON.stringify(SCRIPT));

const agent = spawnAgent(opts.command, { ACP_AGENT_OFFLINE_SCRIPT: scriptPath });
const { agentStdout, agentStdin, flush: flushTaps } = tappedStreams(agent.child, record);

// ------------------------------------------------------------------ the client

const updates = [];
const { waitFor, wake } = waiters();

let holdElicitation = false;
let loadSeq = Infinity; // raw seq at which session/load began (states after it are replayed)
const app = acp
  .client({ name: "acp-agent-interop-ts-subagents" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    updates.push(params);
    const kind = params?.update?.sessionUpdate ?? "<none>";
    summary.updateCounts[kind] = (summary.updateCounts[kind] ?? 0) + 1;
    wake();
  })
  .onRequest(acp.methods.client.elicitation.create, async ({ params, signal }) => {
    summary.elicitations.push({
      sessionId: params.sessionId,
      toolCallId: params.toolCallId ?? null,
      mode: params.mode,
      message: params.message,
      fields: Object.keys(params.requestedSchema?.properties ?? {}),
    });
    wake();
    if (holdElicitation) {
      await new Promise((resolve) => {
        if (signal.aborted) resolve();
        else signal.addEventListener("abort", resolve, { once: true });
      });
      summary.elicitationsAborted += 1;
      throw signal.reason ?? acp.RequestError.requestCancelled();
    }
    return { action: "accept", content: { strategy: "bold", files: ["b"] } };
  })
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    summary.permissionRequests.push({ sessionId: params.sessionId, title: params.toolCall?.title });
    const allow = params.options.find((o) => o.kind === "allow_once");
    return { outcome: { outcome: "selected", optionId: allow.optionId } };
  })
  .onRequest("*", ({ method }) => {
    throw acp.RequestError.methodNotFound(method);
  });

const announcedOn = (parent) => [
  ...new Set(
    updates
      .filter((u) => u.sessionId === parent && u.update?.sessionUpdate === "subagent_update")
      .map((u) => u.update.sessionId),
  ),
];
const hasText = (sid, text) =>
  updates.some(
    (u) =>
      u.sessionId === sid &&
      u.update?.sessionUpdate === "agent_message_chunk" &&
      String(u.update.content?.text ?? "").includes(text),
  );

async function turn(agent, sessionId, name, { cancel } = {}) {
  const known = announcedOn(sessionId).length;
  const asked = summary.elicitations.length;
  const t = { name, stopReason: null };
  summary.turns.push(t);
  const pending = agent.request(acp.methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: name }],
  });
  pending.catch(() => {});
  try {
    if (cancel === "on-elicit") {
      await waitFor(() => summary.elicitations.length > asked, opts.stepTimeoutMs, `a question in "${name}"`);
      await agent.notify(acp.methods.agent.session.cancel, { sessionId });
    } else if (cancel) {
      await waitFor(() => announcedOn(sessionId).length > known, opts.stepTimeoutMs, `a child in "${name}"`);
      const kid = announcedOn(sessionId)[known];
      await waitFor(() => hasText(kid, "working"), opts.stepTimeoutMs, `the child's first chunk in "${name}"`);
      const target = cancel === "child" ? kid : sessionId;
      await agent.notify(acp.methods.agent.session.cancel, { sessionId: target });
    }
    const response = await pending;
    t.stopReason = response?.stopReason ?? null;
  } catch (err) {
    t.error = `${err?.message ?? err}`;
    errors.push(`turn "${name}": ${t.error}`);
  }
  return t;
}

// Session-directed messages as a client keeps them: upserts merged, chunks appended.
function foldMessages(list) {
  const out = {};
  for (const { sessionId, update: u } of list) {
    if (u?.sessionUpdate !== "session_message" && u?.sessionUpdate !== "session_message_chunk") continue;
    const m = ((out[sessionId] ??= {})[u.messageId] ??= { text: "", chunks: 0 });
    if (u.sessionUpdate === "session_message") {
      for (const k of ["senderSessionId", "recipientSessionId", "senderMessageId", "recipientMessageId"]) {
        if (u[k] !== undefined) m[k] = u[k];
      }
      if (Array.isArray(u.content)) m.text = u.content.map((c) => c.text ?? "").join("");
    } else {
      m.text += u.content?.text ?? "";
      m.chunks += 1;
    }
  }
  return out;
}

// Ordering, from the raw wire: every message naming a child comes after its announcement.
function checkWire(root) {
  const announcedAt = new Map(); // child -> seq
  const parentOf = new Map();
  for (const e of raw) {
    if (e.dir !== "agent->client" || !e.msg) continue;
    const m = e.msg;
    const sid = m.params?.sessionId;
    const u = m.params?.update;
    if (m.method === "session/update" && u?.sessionUpdate === "subagent_update") {
      if (!announcedAt.has(u.sessionId)) {
        announcedAt.set(u.sessionId, e.seq);
        parentOf.set(u.sessionId, sid);
        check(sid === root || announcedAt.has(sid), `child ${u.sessionId} announced on unknown ${sid}`);
      }
      const info = (summary.children[u.sessionId] ??= { title: null, states: [] });
      if (u.title) info.title = u.title;
      if (u.state && e.seq < loadSeq) info.states.push(u.state);
      check(!JSON.stringify(u).includes("null"), `subagent_update with null: ${JSON.stringify(u)}`);
    }
    if (sid && sid !== root && "method" in m) {
      check(announcedAt.has(sid), `${m.method} for ${sid} before its announcement`);
    }
    if (u?.sessionUpdate === "session_message" || u?.sessionUpdate === "session_message_chunk") {
      for (const named of [u.senderSessionId, u.recipientSessionId]) {
        if (named && named !== root) check(announcedAt.has(named), `session_message names ${named} early`);
      }
    }
  }
  for (const [kid, info] of Object.entries(summary.children)) {
    const last = info.states.at(-1);
    check(last?.state === "idle" && last.stopReason, `child ${kid} did not end idle: ${JSON.stringify(last)}`);
    info.parent = parentOf.get(kid);
  }
}

async function scenario(agent) {
  await agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: {
      fs: { readTextFile: false, writeTextFile: false },
      terminal: false,
      subagents: {},
      elicitation: { form: {} },
    },
    clientInfo: { name: "acp-agent-interop-ts-subagents", version: summary.sdkVersion },
  });
  const session = await agent.request(acp.methods.agent.session.new, { cwd: workspace, mcpServers: [] });
  const sid = (summary.sessionId = session.sessionId);
  await turn(agent, sid, "parallel");
  await turn(agent, sid, "cancel-child", { cancel: "child" });
  await turn(agent, sid, "cancel-parent", { cancel: "parent" });
  await turn(agent, sid, "ask");
  await turn(agent, sid, "child-ask");
  await turn(agent, sid, "long");
  holdElicitation = true;
  await turn(agent, sid, "ask-cancel", { cancel: "on-elicit" });
  holdElicitation = false;
  summary.messages = foldMessages(updates);
  const before = updates.length;
  loadSeq = seq;
  await agent.request(acp.methods.agent.session.load, { sessionId: sid, cwd: workspace, mcpServers: [] });
  const replayed = updates.slice(before);
  summary.replay = {
    sessions: [...new Set(replayed.map((u) => u.sessionId))],
    kinds: [...new Set(replayed.map((u) => u.update?.sessionUpdate))],
    messages: foldMessages(replayed),
  };
  summary.parentText = updates
    .filter((u) => u.sessionId === sid && u.update?.sessionUpdate === "agent_message_chunk")
    .map((u) => u.update.content.text)
    .join("");
}

summary.agentExit = await runScenario(app, acp.ndJsonStream(agentStdin, agentStdout), agent,
  flushTaps, opts.timeoutMs, errors, scenario);
checkWire(summary.sessionId);
const rawUpdates = raw.filter((e) => e.dir === "agent->client" && e.msg?.method === "session/update").length;
check(rawUpdates === updates.length, `the SDK delivered ${updates.length} of ${rawUpdates} session/updates`);
check(sdkErrors.length === 0, `the SDK reported errors: ${sdkErrors.slice(0, 3).join(" | ")}`);
summary.stderrTail = agent.stderrTail();
summary.ok = errors.length === 0;
fs.rmSync(tmpBase, { recursive: true, force: true });
process.stdout.write(JSON.stringify(summary) + "\n");
process.exit(summary.ok ? 0 : 1);
