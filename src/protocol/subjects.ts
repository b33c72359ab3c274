/**
 * Every NATS subject, stream, consumer, bucket and header name the system uses,
 * in one module. Builders validate their tokens so a malformed id can never
 * produce a wildcard or a multi-token subject.
 */

export const PROTOCOL_VERSION = 1;

/** A subject token: no dots, spaces or wildcards. Ids are further limited to this set. */
const TOKEN_RE = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;
/** Session/task ids as the reference accepts them (dots allowed in the id itself). */
export const ID_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

export function assertToken(kind: string, value: string): string {
  if (!TOKEN_RE.test(value)) {
    throw new TypeError(`${kind} ${JSON.stringify(value)} is not a valid subject token (letters, digits, _ and -; at most 128)`);
  }
  return value;
}

/**
 * Ids may contain dots; inside subjects and KV keys an id is one token. The
 * encoding is injective and reversible: `_` becomes `_5F_` and `.` becomes
 * `_2E_`, so every `_` in a token starts an escape (`a.b` is `a_2E_b`, while
 * the id `a_2E_b` is `a_5F_2E_5F_b`). Every subject, key and decoder uses
 * this pair of functions.
 */
export function idToken(kind: string, id: string): string {
  if (!ID_RE.test(id)) throw new TypeError(`${kind} ${JSON.stringify(id)} is not a valid id (${ID_RE.source})`);
  return id.replaceAll("_", "_5F_").replaceAll(".", "_2E_");
}

/** The inverse of `idToken`; throws on a token no id encodes to. */
export function idFromToken(kind: string, token: string): string {
  const id = token.replace(/_(2E|5F)_/g, (_, hex: string) => (hex === "2E" ? "." : "_"));
  if (!ID_RE.test(id) || idToken(kind, id) !== token) {
    throw new TypeError(`${kind} token ${JSON.stringify(token)} does not encode an id`);
  }
  return id;
}

export const STREAMS = {
  sessions: "POLAR_SESSIONS",
  results: "POLAR_RESULTS",
  traces: "POLAR_TRACES",
  /** Work queue of evaluation requests (evaluator actors). */
  evals: "POLAR_EVALS",
  /** Evaluation results, kept for a while so a gateway that subscribes late still finds its result. */
  evalResults: "POLAR_EVAL_RESULTS",
} as const;

export const BUCKETS = {
  tasks: "polar_tasks",
  nodes: "polar_nodes",
  blobs: "polar_blobs",
  /** Cluster-wide control state (inference paused or not, the current policy version). */
  control: "polar_control",
  /** Per-session leases: which attempt holds a session and its deadline (written by gateways). */
  leases: "polar_leases",
  /** A small per-task view for gateways: status and early stop (written by the supervisor). */
  taskFlags: "polar_task_flags",
} as const;

/** The one key of `polar_control` that holds the inference ControlState. */
export const CONTROL_KEY = "inference";

export const HEADERS = {
  contentType: "content-type",
  protocolVersion: "polar-protocol",
  msgId: "Nats-Msg-Id",
  blobRef: "polar-blob",
  error: "polar-error",
  /** HTTP header of task callbacks: `<task_id>:<delivery id>`, stable across retries of one delivery. */
  idempotencyKey: "Idempotency-Key",
} as const;

export const CONTENT_TYPES = {
  msgpack: "application/msgpack",
  json: "application/json",
} as const;

export const SUBJECTS = {
  api: {
    submit: "polar.api.task.submit",
    get: "polar.api.task.get",
    cancel: "polar.api.task.cancel",
    status: "polar.api.status",
    /** Ask one gateway to drain (served by the supervisor, which forwards to `nodeDrain`). */
    nodeDrain: "polar.api.node.drain",
    /** Weight sync: the supervisor fans these out to every gateway and answers per node. */
    inferencePause: "polar.api.inference.pause",
    inferenceResume: "polar.api.inference.resume",
  },
  /** Wildcards a stream binds to. */
  streamSubjects: {
    sessions: "polar.session.dispatch.>",
    results: "polar.session.result.>",
    traces: "polar.trace.>",
    evals: "polar.eval.request.>",
    evalResults: "polar.eval.result.>",
  },
  dispatch: (pool: string) => `polar.session.dispatch.${assertToken("pool", pool)}`,
  result: (taskId: string) => `polar.session.result.${idToken("task_id", taskId)}`,
  /** Results the supervisor records itself (overdue sessions): a subject only the supervisor role may publish on. */
  supervisorResult: (taskId: string) => `polar.session.result.${idToken("task_id", taskId)}.supervisor`,
  trace: (taskId: string, sessionId: string) =>
    `polar.trace.${idToken("task_id", taskId)}.${idToken("session_id", sessionId)}`,
  traceFilter: (taskId: string) => `polar.trace.${idToken("task_id", taskId)}.>`,
  heartbeat: (nodeId: string) => `polar.node.heartbeat.${assertToken("node_id", nodeId)}`,
  heartbeatAll: "polar.node.heartbeat.*",
  /** A gateway answers here while it lives (request/reply): the node monitor asks before it declares a silent node gone. */
  nodePing: (nodeId: string) => `polar.node.ping.${assertToken("node_id", nodeId)}`,
  /** A gateway's own drain endpoint (request/reply, served by that node only). */
  nodeDrain: (nodeId: string) => `polar.node.drain.${assertToken("node_id", nodeId)}`,
  /** Gateway control: cancel a session wherever it runs (core NATS, fan-out). */
  sessionCancel: (sessionId: string) => `polar.session.cancel.${idToken("session_id", sessionId)}`,
  sessionCancelAll: "polar.session.cancel.*",
  /** Gateway control: pause/resume this node's upstream calls (request/reply, one node). */
  nodeInference: (nodeId: string) => `polar.node.inference.${assertToken("node_id", nodeId)}`,
  /** An evaluation request for the evaluators of a pool (work queue). */
  evalRequest: (pool: string) => `polar.eval.request.${assertToken("pool", pool)}`,
  /** The EvalReply of a session's evaluation (every attempt of the session, told apart by `attempt`). */
  evalResult: (sessionId: string) => `polar.eval.result.${idToken("session_id", sessionId)}`,
  event: (kind: EventKind) => `polar.event.${kind}`,
  eventAll: "polar.event.>",
} as const;

export type EventKind =
  | "task.created"
  | "task.updated"
  | "task.done"
  | "session.state_changed"
  | "node.joined"
  | "node.left";

/** Durable pull consumer that all gateways of a pool share. */
export function dispatchConsumer(pool: string): string {
  return `polar-gateways-${assertToken("pool", pool)}`;
}

/** Durable pull consumer that all evaluators of a pool share. */
export function evaluatorConsumer(pool: string): string {
  return `polar-evaluators-${assertToken("pool", pool)}`;
}

export const RESULTS_CONSUMER = "polar-supervisor";

/** KV keys cannot contain every character; ids are limited by ID_RE, which KV accepts. */
export function taskKey(taskId: string): string {
  return idToken("task_id", taskId);
}

/**
 * Keys of the `polar_tasks` bucket. A task is a small header plus one entry
 * per session (so no value grows with `num_samples`), and a `live` index entry
 * while the task is running or its callback is pending.
 */
export const TASK_KEYS = {
  header: (taskId: string) => `task.${taskKey(taskId)}`,
  headerAll: "task.>",
  /** One session of one run of a task (a reused task id gets a new run). */
  session: (taskId: string, run: string, index: number) => `ses.${taskKey(taskId)}.${assertToken("run", run)}.${index}`,
  sessions: (taskId: string, run: string) => `ses.${taskKey(taskId)}.${assertToken("run", run)}.>`,
  live: (taskId: string) => `live.${taskKey(taskId)}`,
  liveAll: "live.>",
  /** The task id back from a `live.<token>` key. */
  liveTaskId: (key: string) => idFromToken("task_id", key.slice("live.".length)),
} as const;

/** Key of a session's lease in `polar_leases`. */
export function leaseKey(sessionId: string): string {
  return idToken("session_id", sessionId);
}

/** Key of a task's flags in `polar_task_flags`. */
export function taskFlagsKey(taskId: string): string {
  return taskKey(taskId);
}

/** Stream behind a KV bucket (for listing and retention). */
export function kvStream(bucket: string): string {
  return `KV_${bucket}`;
}

export function nodeKey(nodeId: string): string {
  return assertToken("node_id", nodeId);
}
