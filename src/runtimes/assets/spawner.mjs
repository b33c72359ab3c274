/**
 * The process spawner: a small Node process that starts a gateway's host
 * processes for it, so that the gateway (which serves the model proxy on its
 * event loop) never blocks in fork and exec. Forking a process of a few
 * hundred MB and waiting for its child to exec costs tens of milliseconds on a
 * busy host; here it costs the spawner's loop, not the proxy's.
 *
 * Messages (IPC, JSON) from the gateway:
 *   {op: "run", id, argv, cwd?, env?, stdin?, maxOutputBytes, graceMs}
 * to the gateway:
 *   {op: "spawned", id, pid}
 *   {op: "done", id, stdout, stderr, code, signal}   code/signal as Node's "exit" event gives them
 *   {op: "error", id, message, code?, errno?, syscall?, path?}   the process could not be started
 * Kills are the gateway's own business (it knows the pid). The spawner leaves
 * when the gateway does (its IPC channel closes).
 */
import { spawn } from "node:child_process";

/** At most `max` bytes of a stream, and a count of what was dropped. */
function sink(max) {
  const chunks = [];
  let kept = 0;
  let dropped = 0;
  return {
    push(chunk) {
      const room = max - kept;
      if (room > 0) {
        const part = chunk.length <= room ? chunk : chunk.subarray(0, room);
        chunks.push(part);
        kept += part.length;
      }
      dropped += Math.max(0, chunk.length - Math.max(0, room));
    },
    text() {
      const s = Buffer.concat(chunks).toString("utf8");
      return dropped > 0 ? `${s}\n[polar: ${dropped} more bytes dropped]` : s;
    },
  };
}

function send(m) {
  if (process.connected) process.send(m);
}

function run(m) {
  let child;
  try {
    child = spawn(m.argv[0], m.argv.slice(1), {
      cwd: m.cwd,
      env: m.env,
      detached: true,
      stdio: [m.stdin === undefined || m.stdin === null ? "ignore" : "pipe", "pipe", "pipe"],
    });
  } catch (e) {
    send({ op: "error", id: m.id, message: e.message, code: e.code });
    return;
  }
  // The pid goes out at once, not on "spawn": the process may call the proxy before more runs are handed out.
  if (child.pid !== undefined) send({ op: "spawned", id: m.id, pid: child.pid });
  const out = sink(m.maxOutputBytes);
  const err = sink(m.maxOutputBytes);
  let exit;
  let settled = false;
  const finish = () => {
    if (settled) return;
    settled = true;
    child.stdout?.destroy();
    child.stderr?.destroy();
    send({ op: "done", id: m.id, stdout: out.text(), stderr: err.text(), code: exit?.code ?? null, signal: exit?.signal ?? null });
  };
  child.stdout.on("data", (c) => out.push(c));
  child.stderr.on("data", (c) => err.push(c));
  child.on("error", (e) => {
    if (settled) return;
    settled = true;
    send({ op: "error", id: m.id, message: e.message, code: e.code, errno: e.errno, syscall: e.syscall, path: e.path });
  });
  child.on("spawn", () => {
    if (child.stdin) {
      child.stdin.on("error", () => {}); // the process may exit without reading it
      child.stdin.end(m.stdin);
    }
  });
  child.on("exit", (code, signal) => {
    exit = { code, signal };
    // Orphans that kept our pipes open must not hold the result hostage. After the grace, one
    // more pass over I/O (setImmediate runs after the poll phase) reads what the pipes already
    // hold: a loop that was busy past the grace would otherwise lose the output.
    setTimeout(() => setImmediate(finish), m.graceMs).unref();
  });
  child.on("close", finish);
}

process.on("message", (m) => {
  if (m && m.op === "run") run(m);
});
process.on("disconnect", () => process.exit(0));
