#!/usr/bin/env node
// A real ACP client built with the official TypeScript SDK (@agentclientprotocol/sdk,
// the `/unstable` entrypoint so draft session updates are parsed, not dropped).
//
//   node ts_client.mjs [--scenario full|demo|drafts|catalog|auth] [--raw-log FILE] [--timeout-ms N] \
//        [--step-timeout-ms N] [--] <agent command...>
//   e.g. node tests/interop/ts_client.mjs .venv/bin/python -m acp_agent --state-dir /tmp/s
//
// Scenarios
//   full (default): initialize (fs/terminal false, draft capabilities session.notices,
//     session.compaction, plan, subagents as {}) -> session/new -> prompt "hello" to
//     completion -> a scripted prompt that never ends, session/cancel after its first
//     agent_message_chunk, expect stopReason "cancelled" -> another prompt still works ->
//     session/close. The offline model is driven by a script this file writes and passes
//     in ACP_AGENT_OFFLINE_SCRIPT.
//   demo: the built-in demo model (no script); prompt "hello" (the greeting), then
//     "run echo hi", answering any session/request_permission with allow_once; both
//     turns must end with end_turn.
//   catalog: the unstable catalogue methods through the SDK's own method names
//     (session.setTitle, status, archive, unarchive, list with `archived`): the
//     capabilities advertised; a title normalised, announced and never replaced by the
//     agent's; status open/saved/unknown; a session archived mid-turn (its prompt ends
//     "cancelled"), hidden from the default list, listed by "only"/"include", unarchived;
//     an unknown filter -32602.
//   auth: sign-in and provider routing, for an agent started with --model openai:gpt-4.1 and
//     a key already stored by `acp-agent login`: initialize with auth.terminal (the terminal
//     method is offered, never accepted by authenticate), auth/status, authenticate, logout
//     (auth/status_update "unauthenticated", session/new -32000), providers/list, invalid
//     providers/set and providers/disable (-32602), disable anthropic, set openai to the
//     model server in $ACP_INTEROP_LLM_URL with an Authorization header (update
//     "authenticated"), then a session whose prompt goes there.
//
// Every raw line in both directions is tapped below the SDK (the byte streams handed to
// ndJsonStream) and appended to --raw-log as JSON lines
//   {"seq": n, "dir": "agent->client" | "client->agent", "line": "...", "unterminated"?: true}
// in the order they crossed the pipe, so a schema checker can replay them. A final JSON
// summary goes to stdout; the exit status is non-zero on any failure. --step-timeout-ms
// bounds each wait (a response, an update, the agent's exit after EOF); --timeout-ms the
// whole scenario.

import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import * as acp from "@agentclientprotocol/sdk/unstable";
import { tappedStreams, waiters } from "./wire_tap.mjs";

// ------------------------------------------------------------------ arguments

function parseArgs(argv) {
  const opts = { scenario: "full", rawLog: null, timeoutMs: 20000, stepTimeoutMs: 8000, command: [] };
  let i = 0;
  while (i < argv.length) {
    const a = argv[i];
    if (a === "--") {
      i += 1;
      break;
    }
    if (a === "--scenario") opts.scenario = argv[++i];
    else if (a === "--raw-log") opts.rawLog = argv[++i];
    else if (a === "--timeout-ms") opts.timeoutMs = Number(argv[++i]);
    else if (a === "--step-timeout-ms") opts.stepTimeoutMs = Number(argv[++i]);
    else break;
    i += 1;
  }
  opts.command = argv.slice(i);
  return opts;
}

const opts = parseArgs(process.argv.slice(2));
if (opts.command.length === 0 || !["full", "demo", "drafts", "catalog", "auth"].includes(opts.scenario)) {
  process.stderr.write(
    "usage: node ts_client.mjs [--scenario full|demo|drafts|catalog|auth] [--raw-log FILE] " +
      "[--timeout-ms N] [--step-timeout-ms N] [--] <agent command...>\n",
  );
  process.exit(2);
}

// ------------------------------------------------------------------ state

const startedAt = Date.now();
const errors = [];
const fail = (msg) => errors.push(String(msg));
const check = (cond, msg) => {
  if (!cond) fail(msg);
  return Boolean(cond);
};

// The SDK reports notifications it could not parse/handle (and other protocol trouble)
// with console.error; any of that is a failure.
const sdkErrors = [];
const origConsoleError = console.error.bind(console);
console.error = (...args) => {
  const text = args
    .map((a) => (typeof a === "string" ? a : safeJson(a)))
    .join(" ");
  sdkErrors.push(text);
  origConsoleError(...args);
};

function safeJson(v) {
  try {
    return JSON.stringify(v);
  } catch {
    return String(v);
  }
}

const summary = {
  ok: false,
  scenario: opts.scenario,
  sdkVersion: null,
  errors,
  sdkErrors,
  initialize: null,
  sessionId: null,
  turns: [],
  updateCounts: {},
  permissionRequests: [],
  unexpectedRequests: [],
  foreignSessionUpdates: 0,
  raw: { agentToClient: 0, clientToAgent: 0, unterminated: 0 },
  agentExit: null,
  stderrTail: "",
  elapsedMs: 0,
};
try {
  const pkg = JSON.parse(
    fs.readFileSync(
      new URL("./node_modules/@agentclientprotocol/sdk/package.json", import.meta.url),
      "utf8",
    ),
  );
  summary.sdkVersion = pkg.version;
} catch {
  // informational only
}

// ------------------------------------------------------------------ raw tap

let seq = 0;
const rawEntries = []; // {seq, dir, msg} in wire order, for exact per-turn attribution
if (opts.rawLog) fs.writeFileSync(opts.rawLog, "");
function record(dir, line, unterminated = false) {
  const entry = { seq: seq++, dir, line };
  let msg = null;
  try {
    msg = JSON.parse(line);
  } catch {
    // the pytest side reports non-JSON lines (SchemaChecker.check_line)
  }
  rawEntries.push({ seq: entry.seq, dir, msg });
  if (unterminated) {
    entry.unterminated = true;
    summary.raw.unterminated += 1;
  }
  if (dir === "agent->client") summary.raw.agentToClient += 1;
  else summary.raw.clientToAgent += 1;
  if (opts.rawLog) fs.appendFileSync(opts.rawLog, JSON.stringify(entry) + "\n");
}


// ------------------------------------------------------------------ agent process

const tmpBase = fs.mkdtempSync(path.join(os.tmpdir(), "acp-ts-client-"));
const workspace = path.join(tmpBase, "ws");
fs.mkdirSync(workspace);
fs.writeFileSync(path.join(workspace, "hello.txt"), "hello\nworld\n");

const NEVER = "NEVER-REACHED-AFTER-CANCEL";
const SCRIPT = [
  // prompt 1 ("hello")
  [{ thinking: "The user greets me." }, { text: "Hello from the scripted offline model!" }],
  // prompt 2: a turn that only a cancel can end, cancelled after the first chunk
  [{ text: "partial answer " }, { hang: true }, { text: NEVER }],
  // prompt 3: the session still works after the cancel
  [{ text: "Still here after the cancel." }],
];

// The draft features (imported from @agentclientprotocol/sdk/unstable): a notice while
// retrying, a plan document, a compaction with its summary chunks.
const DRAFT_SCRIPT = [
  [{ error: { status: 429, retry_after: 0.01, message: "slow down" } }],
  [{ text: "Answered after a retry." }],
  [{ tool_call: { name: "write_plan", arguments: { content: "## Plan\n- [ ] Split the lexer\n" } } }],
  [{ text: "The plan is written." }],
  [{ text: "## Summary\n- The user asked for a retry and a plan." }],
];

// The catalogue: one answer, then a turn that only archiving its session ends.
const CATALOG_SCRIPT = [
  [{ text: "First answer." }],
  [{ text: "partial answer " }, { hang: true }, { text: NEVER }],
];
const SCRIPTS = { full: SCRIPT, drafts: DRAFT_SCRIPT, catalog: CATALOG_SCRIPT };

const childEnv = { ...process.env };
if (SCRIPTS[opts.scenario]) {
  const scriptPath = path.join(tmpBase, "script.json");
  fs.writeFileSync(scriptPath, JSON.stringify(SCRIPTS[opts.scenario]));
  childEnv.ACP_AGENT_OFFLINE_SCRIPT = scriptPath;
} else {
  delete childEnv.ACP_AGENT_OFFLINE_SCRIPT;
}

const child = spawn(opts.command[0], opts.command.slice(1), {
  stdio: ["pipe", "pipe", "pipe"],
  env: childEnv,
});
let stderrBuf = "";
child.stderr.setEncoding("utf8");
child.stderr.on("data", (d) => {
  stderrBuf += d;
  if (stderrBuf.length > 20000) stderrBuf = stderrBuf.slice(-10000);
});
child.stdin.on("error", () => {}); // EPIPE if the agent dies; reported via exit status
const childExited = new Promise((resolve) => {
  child.on("exit", (code, signal) => resolve({ code, signal }));
  child.on("error", (err) => {
    fail(`could not spawn agent: ${err.message}`);
    resolve({ code: null, signal: null, spawnError: err.message });
  });
});

const { agentStdout, agentStdin, flush: flushTaps } = tappedStreams(child, record);

// ------------------------------------------------------------------ client app

const updates = []; // every session/update params, in order
const statusUpdates = []; // every auth/status_update params, in order
const { waitFor, wake: notifyWaiters } = waiters();
function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

const app = acp
  .client({ name: "acp-agent-interop-ts" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    updates.push(params);
    const kind = params?.update?.sessionUpdate ?? "<none>";
    summary.updateCounts[kind] = (summary.updateCounts[kind] ?? 0) + 1;
    if (summary.sessionId && params.sessionId !== summary.sessionId) {
      summary.foreignSessionUpdates += 1;
    }
    notifyWaiters();
  })
  .onNotification(acp.methods.client.auth.statusUpdate, ({ params }) => {
    statusUpdates.push(params);
    notifyWaiters();
  })
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    const seenToolCall = updates.some(
      (u) =>
        u.update?.sessionUpdate === "tool_call" &&
        u.update.toolCallId === params.toolCall?.toolCallId,
    );
    const allow = params.options.find((o) => o.kind === "allow_once");
    summary.permissionRequests.push({
      toolCallId: params.toolCall?.toolCallId,
      optionKinds: params.options.map((o) => o.kind),
      toolCallAnnouncedBefore: seenToolCall,
    });
    notifyWaiters();
    if (!allow) return { outcome: { outcome: "cancelled" } };
    return { outcome: { outcome: "selected", optionId: allow.optionId } };
  })
  .onRequest("*", ({ method }) => {
    // fs and terminal were advertised as false: the agent must not call them.
    summary.unexpectedRequests.push(method);
    throw acp.RequestError.methodNotFound(method);
  });

// ------------------------------------------------------------------ helpers

const CLIENT_CAPABILITIES = {
  fs: { readTextFile: false, writeTextFile: false },
  terminal: false,
  session: { notices: {}, compaction: {} },
  plan: {},
  subagents: {},
};

function textOf(turnUpdates, kind = "agent_message_chunk") {
  return turnUpdates
    .filter((u) => u.update?.sessionUpdate === kind && u.update.content?.type === "text")
    .map((u) => u.update.content.text)
    .join("");
}

function countKinds(turnUpdates) {
  const counts = {};
  for (const u of turnUpdates) {
    const k = u.update?.sessionUpdate ?? "<none>";
    counts[k] = (counts[k] ?? 0) + 1;
  }
  return counts;
}

async function runTurn(agent, sessionId, name, text, { cancelAfterFirstChunk = false } = {}) {
  const from = updates.length;
  const t0 = Date.now();
  const turn = { name, prompt: text, stopReason: null, ms: 0, updateCounts: {}, text: "" };
  summary.turns.push(turn);
  const promptPromise = agent.request(acp.methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text }],
  });
  // Keep a rejection from going unhandled while we wait for the first chunk.
  promptPromise.catch(() => {});
  try {
    if (cancelAfterFirstChunk) {
      await waitFor(
        () =>
          updates
            .slice(from)
            .some(
              (u) =>
                u.update?.sessionUpdate === "agent_message_chunk" &&
                String(u.update.content?.text ?? "").startsWith("partial"),
            ),
        opts.stepTimeoutMs,
        `the first agent_message_chunk of turn "${name}"`,
      );
      turn.cancelSentAfterMs = Date.now() - t0;
      await agent.notify(acp.methods.agent.session.cancel, { sessionId });
    }
    const response = await withTimeout(promptPromise, opts.stepTimeoutMs, `session/prompt of turn "${name}"`);
    turn.stopReason = response?.stopReason ?? null;
    if (cancelAfterFirstChunk) turn.cancelToResponseMs = Date.now() - t0 - turn.cancelSentAfterMs;
  } catch (err) {
    turn.error = `${err?.name ?? "Error"}: ${err?.message ?? err}` +
      (err?.code !== undefined ? ` (code ${err.code})` : "");
    fail(`turn "${name}": ${turn.error}`);
  }
  turn.ms = Date.now() - t0;
  return turn;
}

// Per-turn statistics from the raw wire order (the SDK dispatches notifications
// concurrently with responses, so its callback order is not exact): the k-th
// session/prompt request owns the session/update lines between it and its response.
const TURN_BOUND_KINDS = new Set([
  "agent_message_chunk",
  "agent_thought_chunk",
  "tool_call",
  "tool_call_update",
]);
function attributeTurns(final = false) {
  const prompts = rawEntries.filter(
    (e) => e.dir === "client->agent" && e.msg?.method === "session/prompt",
  );
  prompts.forEach((req, k) => {
    const turn = summary.turns[k];
    if (!turn) return;
    const resp = rawEntries.find(
      (e) =>
        e.dir === "agent->client" && e.seq > req.seq && e.msg && !("method" in e.msg) &&
        e.msg.id === req.msg.id,
    );
    const nextReq = prompts[k + 1];
    const end = resp ? resp.seq : Infinity;
    const sessionUpdates = (lo, hi) =>
      rawEntries
        .filter(
          (e) =>
            e.dir === "agent->client" && e.seq > lo && e.seq < hi &&
            e.msg?.method === "session/update" && e.msg.params?.sessionId === req.msg.params.sessionId,
        )
        .map((e) => e.msg.params);
    const mine = sessionUpdates(req.seq, end);
    turn.updateCounts = countKinds(mine);
    turn.text = textOf(mine);
    turn.messageIds = [
      ...new Set(
        mine
          .filter((u) => u.update?.sessionUpdate === "agent_message_chunk")
          .map((u) => u.update.messageId ?? null),
      ),
    ];
    if (resp && final) {
      // Updates that belong to a turn must come before its session/prompt response.
      const late = sessionUpdates(end, nextReq ? nextReq.seq : Infinity).filter((u) =>
        TURN_BOUND_KINDS.has(u.update?.sessionUpdate),
      );
      turn.lateUpdates = countKinds(late);
      check(
        late.length === 0,
        `turn "${turn.name}": ${late.length} ${safeJson(turn.lateUpdates)} update(s) after its session/prompt response`,
      );
    }
  });
}


// ------------------------------------------------------------------ scenarios

async function scenarioFull(agent) {
  const init = await agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: CLIENT_CAPABILITIES,
    clientInfo: { name: "acp-agent-interop-ts", version: summary.sdkVersion ?? "0" },
  });
  summary.initialize = { protocolVersion: init.protocolVersion, agentInfo: init.agentInfo ?? null };
  check(init.protocolVersion === 1, `initialize: protocolVersion ${init.protocolVersion}, want 1`);

  const session = await agent.request(acp.methods.agent.session.new, {
    cwd: workspace,
    mcpServers: [],
  });
  summary.sessionId = session.sessionId;
  check(typeof session.sessionId === "string" && session.sessionId, "session/new: no sessionId");

  const t1 = await runTurn(agent, session.sessionId, "hello", "hello");
  attributeTurns();
  check(t1.stopReason === "end_turn", `turn hello: stopReason ${t1.stopReason}, want end_turn`);
  check(t1.updateCounts.agent_message_chunk > 0, "turn hello: no agent_message_chunk");
  check(t1.text.includes("Hello from the scripted"), `turn hello: unexpected text ${JSON.stringify(t1.text)}`);

  const t2 = await runTurn(agent, session.sessionId, "long-cancelled", "tell me a long story", {
    cancelAfterFirstChunk: true,
  });
  attributeTurns();
  check(t2.stopReason === "cancelled", `turn long-cancelled: stopReason ${t2.stopReason}, want cancelled`);
  check(t2.text.startsWith("partial answer"), `turn long-cancelled: text ${JSON.stringify(t2.text)}`);

  const t3 = await runTurn(agent, session.sessionId, "after-cancel", "are you still there?");
  attributeTurns();
  check(t3.stopReason === "end_turn", `turn after-cancel: stopReason ${t3.stopReason}, want end_turn`);
  check(t3.text.includes("Still here after the cancel."), `turn after-cancel: text ${JSON.stringify(t3.text)}`);

  check(
    !updates.some((u) => JSON.stringify(u).includes(NEVER)),
    "the cancelled turn kept streaming: the text after its hang reached the client",
  );

  try {
    await withTimeout(
      agent.request(acp.methods.agent.session.close, { sessionId: session.sessionId }),
      opts.stepTimeoutMs,
      "session/close",
    );
    summary.sessionClosed = true;
  } catch (err) {
    fail(`session/close: ${err?.message ?? err}`);
  }
}

async function scenarioDrafts(agent) {
  await agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: CLIENT_CAPABILITIES,
    clientInfo: { name: "acp-agent-interop-ts", version: summary.sdkVersion ?? "0" },
  });
  const session = await agent.request(acp.methods.agent.session.new, { cwd: workspace, mcpServers: [] });
  summary.sessionId = session.sessionId;
  const kinds = (from) => updates.slice(from).map((u) => u.update?.sessionUpdate);
  let from = updates.length;
  const retry = await runTurn(agent, session.sessionId, "retry", "please answer");
  check(retry.stopReason === "end_turn", `turn retry: ${retry.stopReason}`);
  const notice = updates.slice(from).find((u) => u.update?.sessionUpdate === "notice");
  check(notice && notice.update.severity === "warning", "no warning notice while retrying");
  from = updates.length;
  const plan = await runTurn(agent, session.sessionId, "plan", "write the plan");
  check(plan.stopReason === "end_turn", `turn plan: ${plan.stopReason}`);
  const planUpdate = updates.slice(from).find((u) => u.update?.sessionUpdate === "plan_update");
  check(planUpdate && planUpdate.update.plan.type === "markdown" && planUpdate.update.plan.planId,
    "no markdown plan_update with a planId");
  check(!kinds(from).includes("plan"), "a classic plan update was sent to a client with `plan`");
  from = updates.length;
  const compact = await runTurn(agent, session.sessionId, "compact", "/compact");
  check(compact.stopReason === "end_turn", `turn compact: ${compact.stopReason}`);
  const c = kinds(from).filter((k) => k === "compaction_update" || k === "compaction_summary_chunk");
  check(c[0] === "compaction_update" && c[c.length - 1] === "compaction_update" && c.length >= 3,
    `compaction order: ${c.join(",")}`);
  const statuses = updates.slice(from).filter((u) => u.update?.sessionUpdate === "compaction_update")
    .map((u) => u.update.status);
  check(statuses.join(",") === "in_progress,completed", `compaction statuses: ${statuses.join(",")}`);
  summary.drafts = { notice: notice?.update ?? null, planUpdate: planUpdate?.update ?? null, compaction: c };
}

async function scenarioCatalog(agent) {
  const init = await agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: CLIENT_CAPABILITIES,
    clientInfo: { name: "acp-agent-interop-ts", version: summary.sdkVersion ?? "0" },
  });
  const caps = init.agentCapabilities?.sessionCapabilities ?? {};
  for (const name of ["title", "status", "archive"]) {
    check(safeJson(caps[name]) === "{}", `sessionCapabilities.${name}: ${safeJson(caps[name])}`);
  }
  const catalog = {};
  summary.catalog = catalog;
  const session = acp.methods.agent.session;
  const titled = (await agent.request(session.new, { cwd: workspace, mcpServers: [] })).sessionId;
  const set = await agent.request(session.setTitle, { sessionId: titled, title: "  Interop\n\n title " });
  catalog.title = set.title;
  check(set.title === "Interop title", `session/set_title answered ${safeJson(set)}`);
  const infos = () => updates.filter((u) => u.sessionId === titled &&
    u.update?.sessionUpdate === "session_info_update").map((u) => u.update.title);
  await waitFor(() => infos().length > 0, opts.stepTimeoutMs, "session_info_update after set_title");
  catalog.status = [(await agent.request(session.status, { sessionId: titled })).status];
  const first = await runTurn(agent, titled, "titled", "name this session for me");
  check(first.stopReason === "end_turn", `turn titled: ${first.stopReason}`);
  check(safeJson(infos()) === '["Interop title"]', `titles announced: ${safeJson(infos())}`);

  const busy = (await agent.request(session.new, { cwd: workspace, mcpServers: [] })).sessionId;
  const from = updates.length;
  const prompt = agent.request(session.prompt, { sessionId: busy, prompt: [{ type: "text", text: "go" }] });
  prompt.catch(() => {});
  await waitFor(() => updates.slice(from).some((u) => u.sessionId === busy &&
    u.update?.sessionUpdate === "agent_message_chunk"), opts.stepTimeoutMs, "the busy turn's first chunk");
  catalog.archive = await agent.request(session.archive, { sessionId: busy });
  const ended = await withTimeout(prompt, opts.stepTimeoutMs, "the archived session's prompt");
  catalog.archivedStopReason = ended.stopReason;
  check(ended.stopReason === "cancelled", `prompt of the archived session: ${ended.stopReason}`);
  catalog.status.push((await agent.request(session.status, { sessionId: busy })).status);

  const list = async (params) => (await agent.request(session.list, params)).sessions
    .map((s) => `${s.sessionId === titled ? "titled" : "busy"}:${s.archived}:${s.title ?? ""}`);
  catalog.lists = {
    default: await list({}),
    only: await list({ archived: "only" }),
    include: (await list({ archived: "include", cwd: workspace })).sort(),
  };
  await agent.request(session.archive, { sessionId: busy }); // again: fine
  await agent.request(session.unarchive, { sessionId: busy });
  await agent.request(session.unarchive, { sessionId: titled }); // never archived: fine
  catalog.lists.afterUnarchive = (await list({})).sort();
  catalog.status.push((await agent.request(session.status, { sessionId: busy })).status);
  await agent.request(session.close, { sessionId: titled });
  catalog.status.push((await agent.request(session.status, { sessionId: titled })).status);
  const missing = await expectError(agent.request(session.status, { sessionId: "sess_nope" }),
    -32002, "session/status of an unknown session");
  check(missing?.data?.sessionId === "sess_nope", `-32002 data: ${safeJson(missing?.data)}`);
  await expectError(agent.request(session.archive, { sessionId: "sess_nope" }), -32002,
    "session/archive of an unknown session");
  await expectError(agent.request(session.list, { archived: "_custom" }), -32602,
    "session/list with an unknown archive filter");
  await expectError(agent.request(session.setTitle, { sessionId: busy, title: " \n " }), -32602,
    "session/set_title with a blank title");
  const want = {
    status: ["open", "saved", "saved", "saved"],
    lists: {
      default: ["titled:false:Interop title"],
      only: ["busy:true:"],
      include: ["busy:true:", "titled:false:Interop title"],
      afterUnarchive: ["busy:false:", "titled:false:Interop title"],
    },
  };
  check(safeJson(catalog.status) === safeJson(want.status), `statuses: ${safeJson(catalog.status)}`);
  check(safeJson(catalog.lists) === safeJson(want.lists), `lists: ${safeJson(catalog.lists)}`);
}

async function expectError(promise, code, what) {
  try {
    const result = await promise;
    fail(`${what}: succeeded (${safeJson(result)}), want error ${code}`);
    return null;
  } catch (err) {
    check(err?.code === code, `${what}: error ${err?.code} ${err?.message}, want ${code}`);
    return err;
  }
}

async function scenarioAuth(agent) {
  const llmUrl = process.env.ACP_INTEROP_LLM_URL;
  check(llmUrl, "ACP_INTEROP_LLM_URL is not set");
  const auth = {};
  summary.auth = auth;
  const init = await agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { ...CLIENT_CAPABILITIES, auth: { terminal: true } },
    clientInfo: { name: "acp-agent-interop-ts", version: summary.sdkVersion ?? "0" },
  });
  auth.capabilities = init.agentCapabilities;
  auth.authMethods = init.authMethods;
  const terminal = init.authMethods.find((m) => m.type === "terminal");
  check(terminal && safeJson(terminal.args) === '["login"]', `terminal method: ${safeJson(terminal)}`);
  await expectError(
    agent.request(acp.methods.agent.authenticate, { methodId: terminal?.id ?? "login" }),
    -32602, "authenticate with the terminal method");

  auth.statusBefore = await agent.request(acp.methods.agent.auth.status, {});
  await agent.request(acp.methods.agent.authenticate, { methodId: "api-key" });
  await agent.request(acp.methods.agent.logout, {});
  await waitFor(() => statusUpdates.some((u) => u.state === "unauthenticated"), 5000,
    "auth/status_update unauthenticated after logout");
  auth.statusAfterLogout = await agent.request(acp.methods.agent.auth.status, {});
  await expectError(agent.request(acp.methods.agent.session.new, { cwd: workspace, mcpServers: [] }),
    -32000, "session/new after logout");

  auth.listBefore = (await agent.request(acp.methods.agent.providers.list, {})).providers;
  const bad = await expectError(agent.request(acp.methods.agent.providers.set, {
    providerId: "openai", apiType: "openai", baseUrl: "not a url",
  }), -32602, "providers/set with a bad URL");
  auth.badUrlMessage = bad?.message ?? null;
  await expectError(agent.request(acp.methods.agent.providers.set, {
    providerId: "nope", apiType: "openai", baseUrl: llmUrl,
  }), -32602, "providers/set of an unknown provider");
  await expectError(agent.request(acp.methods.agent.providers.disable, { providerId: "openai" }),
    -32602, "providers/disable of the required provider");
  await agent.request(acp.methods.agent.providers.disable, { providerId: "anthropic" });
  await agent.request(acp.methods.agent.providers.set, {
    providerId: "openai", apiType: "openai", baseUrl: llmUrl,
    headers: { Authorization: "Bearer editor-token" },
  });
  await waitFor(() => statusUpdates.at(-1)?.state === "authenticated", 5000,
    "auth/status_update authenticated after providers/set");
  auth.listAfter = (await agent.request(acp.methods.agent.providers.list, {})).providers;

  const session = await agent.request(acp.methods.agent.session.new, { cwd: workspace, mcpServers: [] });
  summary.sessionId = session.sessionId;
  const turn = await runTurn(agent, session.sessionId, "routed", "hello");
  attributeTurns();
  check(turn.stopReason === "end_turn", `turn routed: stopReason ${turn.stopReason}`);
  auth.statusUpdates = statusUpdates;
}

async function scenarioDemo(agent) {
  const init = await agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: CLIENT_CAPABILITIES,
    clientInfo: { name: "acp-agent-interop-ts", version: summary.sdkVersion ?? "0" },
  });
  summary.initialize = { protocolVersion: init.protocolVersion, agentInfo: init.agentInfo ?? null };
  check(init.protocolVersion === 1, `initialize: protocolVersion ${init.protocolVersion}, want 1`);
  const session = await agent.request(acp.methods.agent.session.new, {
    cwd: workspace,
    mcpServers: [],
  });
  summary.sessionId = session.sessionId;
  const g = await runTurn(agent, session.sessionId, "hello", "hello");
  attributeTurns();
  check(g.stopReason === "end_turn", `turn hello: stopReason ${g.stopReason}, want end_turn`);
  check(g.text.includes("Hello"), `turn hello: no greeting in ${JSON.stringify(g.text)}`);
  const t = await runTurn(agent, session.sessionId, "run-command", "run echo hi");
  attributeTurns();
  check(t.stopReason === "end_turn", `turn run-command: stopReason ${t.stopReason}, want end_turn`);
  check(Object.keys(t.updateCounts).length > 0, "turn run-command: no session/update arrived");
  for (const p of summary.permissionRequests) {
    check(p.optionKinds.includes("allow_once"), `permission request without allow_once: ${safeJson(p)}`);
    check(
      p.toolCallAnnouncedBefore,
      `permission request for ${p.toolCallId} before any tool_call update announcing it`,
    );
  }
}

// ------------------------------------------------------------------ main

const watchdog = setTimeout(() => {
  fail(`watchdog: scenario did not finish within ${opts.timeoutMs} ms`);
  finish(true);
}, opts.timeoutMs);

let finished = false;
async function finish(killNow = false) {
  if (finished) return;
  finished = true;
  clearTimeout(watchdog);
  if (!killNow) {
    // Editors close stdin to stop the agent: it must exit promptly on EOF.
    try {
      child.stdin.end();
    } catch {
      // already closed
    }
  }
  let exit = await withTimeout(
    childExited,
    killNow ? 10 : opts.stepTimeoutMs,
    "agent exit after stdin EOF",
  ).catch(() => null);
  if (exit === null) {
    if (!killNow) fail(`agent did not exit within ${opts.stepTimeoutMs} ms of stdin EOF`);
    child.kill("SIGKILL");
    exit = await childExited;
  }
  flushTaps();
  summary.agentExit = exit;
  attributeTurns(true);
  const rawUpdates = rawEntries.filter(
    (e) => e.dir === "agent->client" && e.msg?.method === "session/update",
  ).length;
  check(
    killNow || rawUpdates === updates.length,
    `the SDK delivered ${updates.length} session/update(s) but ${rawUpdates} crossed the wire`,
  );
  if (!killNow) check(exit.code === 0, `agent exit status ${safeJson(exit)}, want code 0`);
  check(summary.unexpectedRequests.length === 0, `agent sent unexpected requests: ${summary.unexpectedRequests}`);
  check(summary.foreignSessionUpdates === 0, "session/update for an unknown session id");
  check(sdkErrors.length === 0, `the SDK reported errors: ${sdkErrors.slice(0, 3).join(" | ")}`);
  check(summary.raw.unterminated === 0, "a raw line was not newline-terminated");
  summary.stderrTail = stderrBuf.slice(-2000);
  summary.elapsedMs = Date.now() - startedAt;
  summary.ok = errors.length === 0;
  fs.rmSync(tmpBase, { recursive: true, force: true });
  process.stdout.write(JSON.stringify(summary) + "\n");
  process.exit(summary.ok ? 0 : 1);
}

try {
  await app.connectWith(acp.ndJsonStream(agentStdin, agentStdout), async (agent) => {
    if (opts.scenario === "full") await scenarioFull(agent);
    else if (opts.scenario === "drafts") await scenarioDrafts(agent);
    else if (opts.scenario === "catalog") await scenarioCatalog(agent);
    else if (opts.scenario === "auth") await scenarioAuth(agent);
    else await scenarioDemo(agent);
  });
} catch (err) {
  fail(`scenario aborted: ${err?.name ?? "Error"}: ${err?.message ?? err}` +
    (err?.code !== undefined ? ` (code ${err.code}) ${safeJson(err.data ?? null)}` : ""));
}
await finish();
