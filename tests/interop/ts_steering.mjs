#!/usr/bin/env node
// Steering (`_session/steering`) through the official TypeScript SDK client
// (@agentclientprotocol/sdk, `/unstable`), the way orchestrating clients call the
// claude-agent-acp and codex-acp adapters: read `_meta.steering` from the initialize
// result (never probe), then `agent.request("_session/steering", {sessionId, prompt})`.
//
//   node ts_steering.mjs [--raw-log FILE] [--timeout-ms N] [--step-timeout-ms N] \
//        [--] <agent command...>
//
// On a scripted offline model (written here, passed in ACP_AGENT_OFFLINE_SCRIPT):
//   1. no turn, idleBehavior promptRequired: {outcome: "promptRequired", reason: "noRunningTurn"};
//   2. a prompt whose tool call waits for the client's permission answer; a steer then
//      answers "injected"; the answer is given; the prompt ends end_turn, the steer shown
//      as a user_message_chunk after the tool call, before the model's answer;
//   3. no turn: a steer answers "startedNewTurn" and the turn streams;
//   4. an unknown idleBehavior: -32602;
//   5. a prompt, queued behind the turn the steer started (answered once it is over);
//   6. session/load: the steer replayed in its place, under the same messageId.
// Every raw line goes to --raw-log as {"seq", "dir", "line"} for the schema checker; a
// JSON summary goes to stdout; the exit status is non-zero on any failure.

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import * as acp from "@agentclientprotocol/sdk/unstable";
import { clientOptions, runScenario, spawnAgent, tappedStreams, waiters } from "./wire_tap.mjs";

const STEERING = "_session/steering";
const opts = clientOptions(process.argv.slice(2), "ts_steering.mjs");

const errors = [];
const sdkErrors = [];
const origConsoleError = console.error.bind(console);
console.error = (...args) => {
  sdkErrors.push(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" "));
  origConsoleError(...args);
};
const summary = {
  ok: false,
  sdkVersion: JSON.parse(fs.readFileSync(
    new URL("./node_modules/@agentclientprotocol/sdk/package.json", import.meta.url), "utf8")).version,
  errors,
  sdkErrors,
  advertised: null,
  outcomes: {},
  stopReasons: [],
  live: [],
  replayed: [],
  raw: { agentToClient: 0, clientToAgent: 0 },
  agentExit: null,
  stderrTail: "",
};

let seq = 0;
if (opts.rawLog) fs.writeFileSync(opts.rawLog, "");
let rawUpdates = 0;
function record(dir, line, unterminated = false) {
  summary.raw[dir === "agent->client" ? "agentToClient" : "clientToAgent"] += 1;
  if (dir === "agent->client" && line.includes('"session/update"')) rawUpdates += 1;
  const entry = { seq: seq++, dir, line, ...(unterminated ? { unterminated: true } : {}) };
  if (opts.rawLog) fs.appendFileSync(opts.rawLog, JSON.stringify(entry) + "\n");
}

const tmpBase = fs.mkdtempSync(path.join(os.tmpdir(), "acp-ts-steering-"));
const workspace = path.join(tmpBase, "ws");
fs.mkdirSync(workspace);
const SCRIPT = [
  [{ tool_call: { name: "run_command", arguments: { command: "echo hi" } } }],
  [{ text: "Briefly: hi." }],
  [{ text: "Started by a steer." }],
  [{ text: "Done." }],
];
const scriptPath = path.join(tmpBase, "script.json");
fs.writeFileSync(scriptPath, JSON.stringify(SCRIPT));
const agent = spawnAgent(opts.command, { ACP_AGENT_OFFLINE_SCRIPT: scriptPath });
const { agentStdout, agentStdin, flush: flushTaps } = tappedStreams(agent.child, record);

const updates = [];
const waits = waiters();
const wake = waits.wake;
const waitFor = (pred, what) => waits.waitFor(pred, opts.stepTimeoutMs, what);
let asked = 0;
let releasePermission = null;
const app = acp
  .client({ name: "acp-agent-interop-ts-steering" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    updates.push(params);
    wake();
  })
  .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
    asked += 1;
    await new Promise((resolve) => {
      releasePermission = resolve;
      wake();
    });
    const allow = params.options.find((o) => o.kind === "allow_once");
    return { outcome: { outcome: "selected", optionId: allow.optionId } };
  })
  .onRequest("*", ({ method }) => {
    throw acp.RequestError.methodNotFound(method);
  });

// The session's messages as a client shows them: [kind, messageId, text], chunks folded.
function messages(list) {
  const out = [];
  for (const { update: u } of list) {
    const kind = u?.sessionUpdate;
    if (kind === "tool_call") out.push(["tool_call", u.toolCallId, ""]);
    if (kind !== "agent_message_chunk" && kind !== "user_message_chunk") continue;
    const last = out.at(-1);
    if (last && last[0] === kind && last[1] === u.messageId) last[2] += u.content?.text ?? "";
    else out.push([kind, u.messageId, u.content?.text ?? ""]);
  }
  return out;
}

async function scenario(agent) {
  const init = await agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
    clientInfo: { name: "acp-agent-interop-ts-steering", version: summary.sdkVersion },
  });
  summary.advertised = init._meta?.steering ?? null;
  if (summary.advertised?.supported !== true) throw new Error("the agent did not advertise steering");
  const { sessionId } = await agent.request(acp.methods.agent.session.new, { cwd: workspace, mcpServers: [] });
  const steer = (text, meta) =>
    agent.request(STEERING, {
      sessionId,
      prompt: [{ type: "text", text }],
      ...(meta ? { _meta: { steering: meta } } : {}),
    });

  summary.outcomes.idle = await steer("psst", { idleBehavior: "promptRequired" });

  const turn = agent.request(acp.methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "run it" }],
  });
  turn.catch(() => {});
  await waitFor(() => releasePermission !== null, "the permission request");
  summary.outcomes.running = await steer("briefly please");
  releasePermission();
  summary.stopReasons.push((await turn).stopReason);

  summary.outcomes.started = await steer("one more thing");
  await waitFor(() => messages(updates).some((m) => m[2] === "Started by a steer."), "the started turn");

  try {
    await steer("nope", { idleBehavior: "startNewTurn" });
    summary.outcomes.unknownIdle = "accepted";
  } catch (err) {
    summary.outcomes.unknownIdle = err?.code ?? String(err);
  }
  // a prompt queues behind the turn the steer started: its answer means that turn is over
  summary.stopReasons.push((await agent.request(acp.methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "that is all" }],
  })).stopReason);
  summary.live = messages(updates);
  const before = updates.length;
  await agent.request(acp.methods.agent.session.load, { sessionId, cwd: workspace, mcpServers: [] });
  summary.replayed = messages(updates.slice(before));
}

summary.agentExit = await runScenario(app, acp.ndJsonStream(agentStdin, agentStdout), agent,
  flushTaps, opts.timeoutMs, errors, scenario);
if (asked !== 1) errors.push(`expected one permission request, got ${asked}`);
if (rawUpdates !== updates.length) errors.push(`the SDK delivered ${updates.length} of ${rawUpdates} session/updates`);
if (sdkErrors.length) errors.push(`the SDK reported errors: ${sdkErrors.slice(0, 3).join(" | ")}`);
summary.stderrTail = agent.stderrTail();
summary.ok = errors.length === 0;
fs.rmSync(tmpBase, { recursive: true, force: true });
process.stdout.write(JSON.stringify(summary) + "\n");
process.exit(summary.ok ? 0 : 1);
