/**
 * Tasks of the scale benchmarks, submitted and followed over the NATS API as
 * a trainer would. The harness is a shell loop of curl calls to the proxy's
 * OpenAI chat route with think time in between (no Node start per session);
 * curl prints each call's total time, which lands in the result's stdout tail.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { request } from "../../src/nats/messages.ts";
import type { SessionResult, SystemStatus, TaskStatus } from "../../src/protocol/schemas.ts";
import { SUBJECTS } from "../../src/protocol/subjects.ts";

/** CALLS model calls, THINK seconds of think time before each (0: none); one line per call: curl's time_total in seconds. */
export const CALL_LOOP = [
  `i=0; while [ "$i" -lt "$CALLS" ]; do`,
  `[ "$THINK" = 0 ] || sleep "$THINK";`,
  `curl -sS --fail -o /dev/null -w '%{time_total}\\n' -H "authorization: Bearer $OPENAI_API_KEY" -H 'content-type: application/json'`,
  `-d '{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":16}' "$OPENAI_BASE_URL/chat/completions" || exit 1;`,
  `i=$((i+1)); done`,
].join(" ");

/**
 * Model calls every THINK s until the file STOP_FILE exists (sessions stay live until the benchmark lets them go).
 * On start it creates a file in LIVE_DIR, so the benchmark counts harnesses actually running.
 * This one starts curl and sleep for every call (two process starts a call).
 */
export const CALL_UNTIL_STOPPED_CURL = [
  `[ -z "$LIVE_DIR" ] || : > "$LIVE_DIR/$$";`,
  `while [ ! -e "$STOP_FILE" ]; do sleep "$THINK"; [ -e "$STOP_FILE" ] && break;`,
  `curl -sS --fail -o /dev/null -w '%{time_total}\\n' -H "authorization: Bearer $OPENAI_API_KEY" -H 'content-type: application/json'`,
  `-d '{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":16}' "$OPENAI_BASE_URL/chat/completions" || exit 1;`,
  `done`,
].join(" ");

/**
 * The same loop in bash alone, starting no process per call: it thinks with
 * `read -t` on a pipe nobody writes, calls over `/dev/tcp` (one connection a
 * call, `Connection: close`, as curl does) and times the call with
 * `$EPOCHREALTIME` (printed in seconds like curl's time_total). The body
 * ends with a newline and the request is written by one `echo`, so bash's
 * line-buffered output sends it in one write (a line per write, Nagle and
 * delayed ACKs added ~40 ms to a call). With 1,024
 * sessions, curl and sleep alone were ~200 process starts a second, which
 * saturated a 2-core host; this measures the proxy instead of the fork rate.
 */
const BASH_SETUP = [
  `[ -z "$LIVE_DIR" ] || : > "$LIVE_DIR/$$";`,
  `exec {idle}<> <(:);`,
  `u=\${OPENAI_BASE_URL#http://}; hp=\${u%%/*}; host=\${hp%:*}; port=\${hp##*:}; path=/\${u#*/}/chat/completions;`,
  `body='{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":16}'$'\\n';`,
];
/** Builds the request in `req`, with the given extra header lines. */
const bashRequest = (extraHeaders: string) =>
  `printf -v req 'POST %s HTTP/1.1\\r\\nHost: %s\\r\\nAuthorization: Bearer %s\\r\\nContent-Type: application/json\\r\\nContent-Length: %d\\r\\n${extraHeaders}\\r\\n%s' "$path" "$hp" "$OPENAI_API_KEY" "\${#body}" "$body";`;
const BASH_THINK = `while [ ! -e "$STOP_FILE" ]; do read -t "$THINK" -u "$idle" _; [ -e "$STOP_FILE" ] && break;`;
/** After a call: fails on a non-200 status, else prints the time since t0 in seconds. */
const BASH_REPORT = [
  `[ "$code" = 200 ] || { echo "HTTP status $code" >&2; exit 1; };`,
  `t1=$EPOCHREALTIME; us=$(( \${t1/./} - \${t0/./} )); printf '%d.%06d\\n' $((us / 1000000)) $((us % 1000000));`,
  `done`,
];

export const CALL_UNTIL_STOPPED = [
  ...BASH_SETUP,
  BASH_THINK,
  `t0=$EPOCHREALTIME; exec 3<>"/dev/tcp/$host/$port" || exit 1;`,
  `${bashRequest("Connection: close\\r\\n")} echo -n "$req" >&3;`,
  `read -r -u 3 _ code _; while read -r -u 3 _; do :; done; exec 3<&-;`,
  ...BASH_REPORT,
].join(" ");

/**
 * The bash loop on one kept-alive connection, as an HTTP client library
 * (every harness CLI) uses it: the proxy checks the connection's peer once,
 * not at every call. It reads each answer by its Content-Length and opens a
 * new connection only when the proxy closed the old one.
 */
export const CALL_UNTIL_STOPPED_KEEPALIVE = [
  `trap '' PIPE;`,
  ...BASH_SETUP,
  `conn=;`,
  `call() { [ -n "$conn" ] || { exec 3<>"/dev/tcp/$host/$port" && conn=1; } || return 1;`,
  `${bashRequest("")} echo -n "$req" >&3 || return 1;`,
  `code=; read -r -u 3 _ code _ || return 1; len=0;`,
  `while IFS= read -r -u 3 line; do line=\${line%$'\\r'}; [ -z "$line" ] && break; case "\${line,,}" in content-length:*) len=\${line#*:}; len=\${len// /};; esac; done;`,
  `[ "$len" -gt 0 ] && read -r -N "$len" -u 3 _; return 0; };`,
  BASH_THINK,
  `t0=$EPOCHREALTIME; call || { exec 3<&-; conn=; t0=$EPOCHREALTIME; call; } || exit 1;`,
  ...BASH_REPORT,
].join(" ");

export interface TaskShape {
  command: string;
  env?: Record<string, string>;
  prepare?: string;
  num_samples: number;
}

export function task(taskId: string, s: TaskShape) {
  return {
    task_id: taskId,
    instruction: "Say hello.",
    num_samples: s.num_samples,
    timeout_seconds: 3600,
    runtime: { backend: "local", kwargs: { isolation: "none" }, prepare: s.prepare ? [{ type: "exec", command: s.prepare }] : [] },
    agent: { harness: "shell", custom_shell: { command: s.command, env: s.env ?? {} } },
    evaluator: { strategy: "session_completed" },
  };
}

export async function submit(nc: NatsConnection, taskId: string, s: TaskShape): Promise<string> {
  const r = await request<{ task_id: string }>(nc, SUBJECTS.api.submit, task(taskId, s), { timeoutMs: 120_000 });
  return r.task_id;
}

/** The task's counters (one session summary, no results). */
export function poll(nc: NatsConnection, taskId: string): Promise<TaskStatus> {
  return request<TaskStatus>(nc, SUBJECTS.api.get, { task_id: taskId, limit: 1 }, { timeoutMs: 60_000 });
}

/** Waits for every task to end; `tick` sees the number of finished sessions about every 250 ms. */
export async function waitAll(nc: NatsConnection, taskIds: string[], tick?: (finished: number) => void, deadlineMs = 3_600_000): Promise<TaskStatus[]> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    const st = await Promise.all(taskIds.map((id) => poll(nc, id)));
    tick?.(st.reduce((n, s) => n + s.completed_sessions, 0));
    if (st.every((s) => s.status === "completed" || s.status === "failed")) return st;
    if (Date.now() > end) throw new Error(`tasks ${taskIds.join(", ")} did not finish within ${deadlineMs} ms`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Every SessionResult of the task, read in pages. */
export async function results(nc: NatsConnection, taskId: string, total: number, page = 25): Promise<SessionResult[]> {
  const out: SessionResult[] = [];
  for (let offset = 0; offset < total; offset += page) {
    const st = await request<TaskStatus>(nc, SUBJECTS.api.get, { task_id: taskId, with_results: true, offset, limit: page }, { timeoutMs: 120_000 });
    out.push(...st.results);
  }
  return out;
}

/** Status counts over tasks, e.g. "COMPLETED 1024". */
export function counts(st: TaskStatus[]): string {
  const c: Record<string, number> = {};
  for (const s of st) for (const [k, v] of Object.entries(s.status_counts ?? {})) c[k] = (c[k] ?? 0) + v;
  return Object.entries(c).map(([k, v]) => `${k} ${v}`).join(", ");
}

export function systemStatus(nc: NatsConnection): Promise<SystemStatus> {
  return request<SystemStatus>(nc, SUBJECTS.api.status, {}, { timeoutMs: 30_000 });
}
