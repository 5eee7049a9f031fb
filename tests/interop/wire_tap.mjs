// The raw wire under the SDK: wraps an agent child process's pipes so that every line
// crossing them, in either direction, reaches `record(dir, line, unterminated)` exactly
// as it crossed the pipe, before the SDK parses it. Shared by the interop clients.
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
