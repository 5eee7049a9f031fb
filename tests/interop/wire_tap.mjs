// The raw wire under the SDK: wraps an agent child process's pipes so that every line
// crossing them, in either direction, reaches `record(dir, line, unterminated)` exactly
// as it crossed the pipe, before the SDK parses it. Shared by the interop clients, with
// the agent's spawning and the waits on what arrives.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";

// Splits a byte stream into lines (on \n) and records each.
function lineTap(dir, record) {
  let pending = Buffer.alloc(0);
  const decoder = new TextDecoder("utf-8", { fatal: false });
  return {
    push(chunk) {
      pending = Buffer.concat([pending, Buffer.from(chunk)]);
      let nl;
      while ((nl = pending.indexOf(0x0a)) !== -1) {
        record(dir, decoder.decode(pending.subarray(0, nl)));
        pending = pending.subarray(nl + 1);
      }
    },
    flush() {
      if (pending.length > 0) record(dir, decoder.decode(pending), true);
      pending = Buffer.alloc(0);
    },
  };
}

// Web streams for `acp.ndJsonStream(agentStdin, agentStdout)`, tapped both ways;
// `flush()` records what is left without a newline (once the agent has exited).
export function tappedStreams(child, record) {
  const inTap = lineTap("agent->client", record);
  const outTap = lineTap("client->agent", record);
  const agentStdout = Readable.toWeb(child.stdout).pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        inTap.push(chunk);
        controller.enqueue(chunk);
      },
      flush() {
        inTap.flush();
      },
    }),
  );
  const stdinWriter = Writable.toWeb(child.stdin).getWriter();
  const agentStdin = new WritableStream({
    async write(chunk) {
      outTap.push(chunk);
      await stdinWriter.write(chunk);
    },
    async close() {
      outTap.flush();
      await stdinWriter.close().catch(() => {});
    },
  });
  const flush = () => {
    inTap.flush();
    outTap.flush();
  };
  return { agentStdout, agentStdin, flush };
}

// The agent command as a child process with `env` added: its exit as a promise and the
// tail of its stderr (for the summary).
export function spawnAgent(command, env) {
  const child = spawn(command[0], command.slice(1), {
    stdio: ["pipe", "pipe", "pipe"],
    env: { ...process.env, ...env },
  });
  let stderrBuf = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d) => {
    stderrBuf = (stderrBuf + d).slice(-10000);
  });
  child.stdin.on("error", () => {});
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  return { child, exited, stderrTail: () => stderrBuf.slice(-2000) };
}

// Waiting for facts the client learns from the wire: `waitFor(pred, ms, what)` resolves
// once `pred()` holds (checked whenever `wake()` is called), or fails after `ms`.
export function waiters() {
  const pending = new Set();
  return {
    waitFor(pred, ms, what) {
      if (pred()) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const w = { pred, resolve };
        w.timer = setTimeout(() => {
          pending.delete(w);
          reject(new Error(`timed out after ${ms} ms waiting for ${what}`));
        }, ms);
        pending.add(w);
      });
    },
    wake() {
      for (const w of [...pending]) {
        if (w.pred()) {
          pending.delete(w);
          clearTimeout(w.timer);
          w.resolve();
        }
      }
    },
  };
}

// Runs `scenario` on `app` connected to the agent (`spawnAgent`'s) over `stream`, bounded
// by `timeoutMs` (then the agent is killed); then closes the agent's stdin, waits for it
// to exit and records what the taps hold unterminated (`flush`). Failures go to `errors`.
// Returns the agent's exit ({code, signal}).
export async function runScenario(app, stream, agent, flush, timeoutMs, errors, scenario) {
  const watchdog = setTimeout(() => {
    errors.push(`watchdog: no finish within ${timeoutMs} ms`);
    agent.child.kill("SIGKILL");
  }, timeoutMs);
  try {
    await app.connectWith(stream, scenario);
  } catch (err) {
    errors.push(`scenario aborted: ${err?.message ?? err}`);
  }
  try {
    agent.child.stdin.end();
  } catch {
    // already closed
  }
  const exit = await agent.exited;
  clearTimeout(watchdog);
  flush();
  return exit;
}

// The options of a client of its own (`ts_subagents.mjs`, `ts_steering.mjs`):
// [--raw-log FILE] [--timeout-ms N] [--step-timeout-ms N] [--] <agent command...>;
// without an agent command, the usage and exit status 2.
export function clientOptions(argv, name) {
  const opts = { rawLog: null, timeoutMs: 20000, stepTimeoutMs: 8000, command: [] };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--raw-log") opts.rawLog = argv[++i];
    else if (argv[i] === "--timeout-ms") opts.timeoutMs = Number(argv[++i]);
    else if (argv[i] === "--step-timeout-ms") opts.stepTimeoutMs = Number(argv[++i]);
    else {
      opts.command = argv.slice(argv[i] === "--" ? i + 1 : i);
      break;
    }
  }
  if (opts.command.length === 0) {
    process.stderr.write(`usage: node ${name} [--raw-log FILE] [--timeout-ms N] ` +
      "[--step-timeout-ms N] [--] <agent...>\n");
    process.exit(2);
  }
  return opts;
}
