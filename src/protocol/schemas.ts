/**
 * Data contracts. One zod schema per message, its inferred type beside it.
 * Field names follow the Polar reference implementation so a trainer written
 * for it works unchanged; extensions are additive and optional.
 *
 * Objects strip unknown keys (the reference ignores extras) except where the
 * reference allows extras (CompletionRecord, CompletionSession), which pass
 * them through.
 */
import { z } from "zod";
import { ID_RE } from "./subjects.ts";

/**
 * Bounds on everything a client sends, named in the error when exceeded. A
 * task must fit one durable record and one dispatch message, and no value it
 * carries may make a timer overflow or a recursive walk exhaust the stack.
 */
export const LIMITS = {
  /** Nesting depth of free-form objects (metadata, settings, config, kwargs). */
  maxDepth: 32,
  /** Values (objects, arrays, scalars) in one free-form object, all levels. */
  maxNodes: 20_000,
  /** Characters of a name-like string (harness, model, strategy, image, path). */
  nameChars: 4096,
  /** Characters of a command or free-form text field other than the instruction. */
  textChars: 65_536,
  instructionChars: 262_144,
  /** Entries of an env map; characters of one env value. */
  envEntries: 512,
  envValueChars: 65_536,
  /** Items of a list (prepare actions, MCP servers, args, volumes). */
  listItems: 256,
  num_samples: 10_000,
  /** Longest budget in seconds (7 days). */
  timeoutSeconds: 604_800,
  /** Nesting depth of a model call's body at the proxy (messages, content blocks, tool schemas). */
  proxyBodyDepth: 128,
} as const;

/** Depth and size of a JSON-like value, walked without recursion (a deep value cannot overflow the stack). */
export function shapeOf(value: unknown, stopAtDepth = Infinity): { depth: number; nodes: number } {
  let depth = 0;
  let nodes = 0;
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length) {
    const [v, d] = stack.pop()!;
    nodes++;
    if (d > depth) depth = d;
    if (depth > stopAtDepth) break;
    if (v && typeof v === "object") for (const c of Object.values(v)) stack.push([c, d + 1]);
  }
  return { depth, nodes };
}

const Name = z.string().max(LIMITS.nameChars);
const Text = z.string().max(LIMITS.textChars);
const list = <T extends z.ZodType>(item: T) => z.array(item).max(LIMITS.listItems);
const Seconds = z.number().positive().max(LIMITS.timeoutSeconds);

/** A free-form object from a client: bounded depth and size. */
const BoundedDict = z.record(z.string(), z.unknown()).superRefine((m, ctx) => {
  const { depth, nodes } = shapeOf(m, LIMITS.maxDepth);
  if (depth > LIMITS.maxDepth) ctx.addIssue({ code: "custom", message: `nested deeper than the limit of ${LIMITS.maxDepth} levels` });
  else if (nodes > LIMITS.maxNodes) ctx.addIssue({ code: "custom", message: `holds ${nodes} values, more than the limit of ${LIMITS.maxNodes}` });
});
const Dict = z.record(z.string(), z.unknown());
const Env = z
  .record(Name, z.string().max(LIMITS.envValueChars))
  .refine((e) => Object.keys(e).length <= LIMITS.envEntries, `at most ${LIMITS.envEntries} entries`);
const Id = z.string().regex(ID_RE, "must match ^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$");
const Finite = z.number().refine(Number.isFinite, "must be a finite number");

/** `metadata.agent_timeout`, when present, must be a positive number within the budget limit (not a bool). */
const TaskMetadata = BoundedDict.superRefine((m, ctx) => {
  if ("agent_timeout" in m) {
    const v = m.agent_timeout;
    if (typeof v !== "number" || !Number.isFinite(v) || v <= 0 || v > LIMITS.timeoutSeconds) {
      ctx.addIssue({ code: "custom", path: ["agent_timeout"], message: `must be a positive number of seconds <= ${LIMITS.timeoutSeconds}` });
    }
  }
  if ("eval_sampling_seed_base" in m) {
    const v = m.eval_sampling_seed_base;
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0 || v > 2 ** 32 - 1 - LIMITS.num_samples) {
      ctx.addIssue({ code: "custom", path: ["eval_sampling_seed_base"], message: `must be an integer in [0, ${2 ** 32 - 1 - LIMITS.num_samples}]` });
    }
  }
});

// ---------------------------------------------------------------- runtime

export const PrepareAction = z
  .object({
    type: z.enum(["upload_file", "upload_dir", "exec"]),
    source: Name.optional(),
    target: Name.optional(),
    command: Text.optional(),
    cwd: Name.optional(),
    env: Env.optional(),
    max_attempts: z.number().int().min(1).max(10).default(1),
    retry_backoff_seconds: z.number().min(0).max(60).default(0),
  })
  .superRefine((a, ctx) => {
    if (a.type === "exec" && !a.command) ctx.addIssue({ code: "custom", path: ["command"], message: "required for exec" });
    if (a.type !== "exec") {
      if (!a.source) ctx.addIssue({ code: "custom", path: ["source"], message: `required for ${a.type}` });
      if (!a.target) ctx.addIssue({ code: "custom", path: ["target"], message: `required for ${a.type}` });
    }
  });
export type PrepareAction = z.infer<typeof PrepareAction>;

export const RuntimeSpec = z
  .object({
    backend: z.enum(["docker", "apptainer", "local"]).default("docker"),
    image: Name.min(1).optional(),
    prepare: list(PrepareAction).default([]),
    eval_prepare: list(PrepareAction).nullable().optional(),
    env: Env.default({}),
    /** Reference default is "host"; ours is decided by the backend (docker: "none"). */
    network: Name.nullable().optional(),
    workdir: Name.nullable().optional(),
    direct_exec_init_command: Text.nullable().optional(),
    cpus: z.number().positive().max(4096).nullable().optional(),
    memory_mb: z.number().int().positive().max(2 ** 31 - 1).nullable().optional(),
    storage_mb: z.number().int().positive().max(2 ** 31 - 1).nullable().optional(),
    pids_limit: z.number().int().positive().max(2 ** 31 - 1).nullable().optional(),
    gpus: z.number().int().min(0).max(1024).default(0),
    allow_internet: z.boolean().default(true),
    internet_volumes: list(Name).default([]),
    import_path: Name.nullable().optional(),
    kwargs: BoundedDict.default({}),
  })
  .superRefine((r, ctx) => {
    if (r.backend !== "local" && !r.image) {
      ctx.addIssue({ code: "custom", path: ["image"], message: `required for backend ${r.backend}` });
    }
  });
export type RuntimeSpec = z.infer<typeof RuntimeSpec>;

export const ExecInput = z.object({
  command: Text.min(1),
  cwd: Name.nullable().optional(),
  env: Env.nullable().optional(),
  timeout_seconds: Seconds.optional(),
});
export type ExecInput = z.infer<typeof ExecInput>;

// ---------------------------------------------------------------- agent

export const MCPServerSpec = z
  .object({
    name: Name.min(1),
    transport: z.enum(["stdio", "sse", "streamable-http"]),
    command: Text.nullable().optional(),
    args: list(Text).default([]),
    url: Name.nullable().optional(),
  })
  .superRefine((m, ctx) => {
    if (m.transport === "stdio" && !m.command) ctx.addIssue({ code: "custom", path: ["command"], message: "required for stdio" });
    if (m.transport !== "stdio" && !m.url) ctx.addIssue({ code: "custom", path: ["url"], message: `required for ${m.transport}` });
  });
export type MCPServerSpec = z.infer<typeof MCPServerSpec>;

export const AgentSpec = z
  .object({
    harness: Name.min(1).nullable().optional(),
    import_path: Name.min(1).nullable().optional(),
    model_name: Name.nullable().optional(),
    settings: BoundedDict.default({}),
    env: Env.default({}),
    mcp_servers: list(MCPServerSpec).default([]),
    skills_path: Name.nullable().optional(),
    custom_shell: ExecInput.nullable().optional(),
  })
  .superRefine((a, ctx) => {
    if (!a.harness === !a.import_path) {
      ctx.addIssue({ code: "custom", path: ["harness"], message: "exactly one of harness and import_path is required" });
    }
    if (a.harness === "shell") {
      if (!a.custom_shell) ctx.addIssue({ code: "custom", path: ["custom_shell"], message: "required when harness is shell" });
      if (a.mcp_servers.length) ctx.addIssue({ code: "custom", path: ["mcp_servers"], message: "must be empty for the shell harness" });
      if (a.skills_path) ctx.addIssue({ code: "custom", path: ["skills_path"], message: "must be empty for the shell harness" });
    } else if (a.custom_shell) {
      ctx.addIssue({ code: "custom", path: ["custom_shell"], message: "only allowed when harness is shell" });
    }
  });
export type AgentSpec = z.infer<typeof AgentSpec>;

export const AgentRunResult = z.object({
  status: z.enum(["completed", "failed", "timeout"]),
  return_code: z.number().int(),
  error: z.string().nullable().optional(),
  metadata: Dict.default({}),
});
export type AgentRunResult = z.infer<typeof AgentRunResult>;

// ---------------------------------------------------------------- strategies

export const StrategySpec = z.object({
  strategy: Name.min(1),
  config: BoundedDict.default({}),
});
export type StrategySpec = z.infer<typeof StrategySpec>;

export const EvaluatorSpec = z.object({
  strategy: Name.min(1),
  config: BoundedDict.default({}),
  env: Env.default({}),
  refresh_runtime: z.boolean().default(false),
});
export type EvaluatorSpec = z.infer<typeof EvaluatorSpec>;

// ---------------------------------------------------------------- task

const MaxPolicyLag = z.number().int().min(0).max(1_000_000).nullable().optional();

export const TaskRequest = z
  .object({
    task_id: Id,
    instruction: z.string().max(LIMITS.instructionChars),
    num_samples: z.number().int().min(1).max(LIMITS.num_samples).default(1),
    dispatch_priority: z.number().int().min(0).max(100).default(0),
    early_stop_min_usable_sessions: z.number().int().min(1).max(LIMITS.num_samples).nullable().optional(),
    /** Session budget, counted from the start of the session's INIT. */
    timeout_seconds: Seconds.default(600),
    /** Extension: longest a session may wait for a gateway before it is given TIMEOUT (default: no limit). */
    queue_timeout_seconds: Seconds.nullable().optional(),
    runtime: RuntimeSpec.nullable().optional(),
    agent: AgentSpec,
    builder: StrategySpec.default({ strategy: "per_request", config: {} }),
    evaluator: EvaluatorSpec.nullable().optional(),
    callback_url: z.url().max(LIMITS.nameChars).nullable().optional(),
    metadata: TaskMetadata.default({}),
    /** Extension: the gateway pool the sessions are dispatched to. */
    pool: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/).default("default"),
    /**
     * Extension: a trace whose oldest completion is more than this many policy
     * versions behind the version current when its result is published keeps
     * its tokens but gets loss mask 0 (`training_filter.reason: "stale_policy"`).
     */
    max_policy_lag: MaxPolicyLag,
  })
  .superRefine((t, ctx) => {
    const min = t.early_stop_min_usable_sessions;
    if (min != null && min > t.num_samples) {
      ctx.addIssue({ code: "custom", path: ["early_stop_min_usable_sessions"], message: "must be <= num_samples" });
    }
    // Reference fields this server accepts in the schema but does not implement: refused, never ignored.
    const unbuilt: Array<[string[], unknown, string]> = [
      [["agent", "import_path"], t.agent.import_path, "agents are CLI harnesses named by agent.harness"],
      [["runtime", "import_path"], t.runtime?.import_path, "runtimes are the built-in backends named by runtime.backend"],
      [["runtime", "direct_exec_init_command"], t.runtime?.direct_exec_init_command, "use a prepare exec action"],
      [["runtime", "storage_mb"], t.runtime?.storage_mb, "no runtime backend applies a storage quota"],
    ];
    for (const [path, value, hint] of unbuilt) {
      if (value != null) ctx.addIssue({ code: "custom", path, message: `is not supported by this server (${hint})` });
    }
  });
export type TaskRequest = z.infer<typeof TaskRequest>;
export type TaskRequestInput = z.input<typeof TaskRequest>;

export const SessionDispatch = z.object({
  session_id: Id,
  task_id: Id,
  instruction: z.string().max(LIMITS.instructionChars),
  dispatch_priority: z.number().int().min(0).max(100).default(0),
  remaining_timeout_seconds: Seconds,
  runtime: RuntimeSpec.nullable().optional(),
  agent: AgentSpec,
  builder: StrategySpec.default({ strategy: "per_request", config: {} }),
  evaluator: EvaluatorSpec.nullable().optional(),
  callback_url: z.string().nullable().optional(),
  metadata: TaskMetadata.default({}),
  /** Extensions. */
  sample_index: z.number().int().min(0).default(0),
  created_at: z.string().optional(),
  /** When `queue_timeout_seconds` runs out (ISO): a gateway does not start a first delivery pulled after it. */
  queue_deadline_at: z.string().nullable().optional(),
  max_policy_lag: MaxPolicyLag,
});
export type SessionDispatch = z.infer<typeof SessionDispatch>;

// ---------------------------------------------------------------- statuses

export const SESSION_STATUSES = [
  "REGISTERED",
  "INITIALIZING",
  "READY",
  "RUNNING",
  "POST_RUN",
  "BUILDING",
  "EVALUATING",
  "COMPLETED",
  "ERROR",
  "TIMEOUT",
] as const;
export const SessionStatus = z.enum(SESSION_STATUSES);
export type SessionStatus = z.infer<typeof SessionStatus>;
export const TERMINAL_STATUSES: ReadonlySet<SessionStatus> = new Set(["COMPLETED", "ERROR", "TIMEOUT"]);

export const TrajectoryStatus = z.enum(["COMPLETED", "TIMEOUT", "ERROR"]);
export type TrajectoryStatus = z.infer<typeof TrajectoryStatus>;

// ---------------------------------------------------------------- completions

export const CompletionRecord = z.looseObject({
  completion_id: z.string(),
  timestamp: z.string().nullable().optional(),
  /** OpenAI-chat request after the vendor transform, before engine flags. */
  request: Dict,
  /** The client's body as received. */
  original_request: Dict.default({}),
  /** Engine-normalized upstream chat completion (token ids and logprobs included). */
  response: Dict,
  metadata: Dict.default({}),
  /** Extensions: arrival order of the answer within the session, session attempt, API dialect. */
  seq: z.number().int().min(0).optional(),
  attempt: z.number().int().min(1).optional(),
  api_type: z.string().optional(),
  /** The polar policy version in force when the call went upstream. */
  policy_version: z.number().int().min(0).optional(),
  /** The engine's own weight version, when the engine reports one. */
  engine_weight_version: z.string().nullable().optional(),
});
export type CompletionRecord = z.infer<typeof CompletionRecord>;

export const CompletionSession = z.looseObject({
  session_id: z.string(),
  created_at: z.string().nullable().optional(),
  completion_count: z.number().int().min(0).default(0),
  task_id: z.string().nullable().optional(),
  model_requested: z.string().nullable().optional(),
  model_used: z.string().nullable().optional(),
  api_type: z.string().nullable().optional(),
  metadata: Dict.default({}),
  completions: z.array(CompletionRecord).default([]),
});
export type CompletionSession = z.infer<typeof CompletionSession>;

// ---------------------------------------------------------------- traces

export const Trace = z
  .object({
    prompt_ids: z.array(z.number().int()).default([]),
    response_ids: z.array(z.number().int()).default([]),
    loss_mask: z.array(z.union([z.literal(0), z.literal(1)])).default([]),
    prompt_messages: z.array(Dict).default([]),
    response_messages: z.array(Dict).default([]),
    tools: z.array(Dict).nullable().default(null),
    finish_reason: z.string().nullable().default(null),
    response_logprobs: z.array(z.number()).nullable().default(null),
    reward: Finite.nullable().default(null),
    reward_components: z.record(z.string().min(1), Finite).default({}),
    metadata: Dict.default({}),
  })
  .superRefine((t, ctx) => {
    if (t.loss_mask.length && t.loss_mask.length !== t.response_ids.length) {
      ctx.addIssue({ code: "custom", path: ["loss_mask"], message: "length must equal response_ids" });
    }
    if (t.response_logprobs && t.response_logprobs.length !== t.response_ids.length) {
      ctx.addIssue({ code: "custom", path: ["response_logprobs"], message: "length must equal response_ids" });
    }
  });
export type Trace = z.infer<typeof Trace>;

export const Trajectory = z.object({
  status: TrajectoryStatus,
  metadata: Dict.default({}),
  traces: z.array(Trace).default([]),
  error: z.string().nullable().default(null),
});
export type Trajectory = z.infer<typeof Trajectory>;

export const EvalResult = z.object({
  outcome_reward: Finite.nullable().default(null),
  trace_rewards: z.array(Finite.nullable()).nullable().default(null),
  outcome_reward_components: z.record(z.string(), Finite).nullable().default(null),
  trace_reward_components: z.array(z.record(z.string(), Finite).nullable()).nullable().default(null),
  metadata: Dict.default({}),
});
export type EvalResult = z.infer<typeof EvalResult>;

// ---------------------------------------------------------------- results

const ms = z.number().default(0);
const count = z.number().int().default(0);
const msMap = z.record(z.string(), z.number()).default({});
export const SessionTiming = z.strictObject({
  register_to_init_queue_ms: ms,
  rollout_dispatch_ms: ms,
  rollout_result_wait_ms: ms,
  rollout_pipeline_e2e_ms: ms,
  init_ms: ms,
  ready_queue_ms: ms,
  run_ms: ms,
  postrun_queue_ms: ms,
  postrun_ms: ms,
  container_start_ms: ms,
  eval_container_start_ms: ms,
  runtime_validation_ms: ms,
  eval_runtime_validation_ms: ms,
  prepare_ms: ms,
  eval_prepare_ms: ms,
  agent_setup_ms: ms,
  agent_exec_ms: ms,
  agent_postprocess_ms: ms,
  build_ms: ms,
  eval_ms: ms,
  /** Of eval_ms: time POSTRUN waited for an evaluator actor (its worker released meanwhile). */
  eval_wait_ms: ms,
  postrun_exec_ms: ms,
  runtime_stop_ms: ms,
  e2e_ms: ms,
  runtime_exec_ms: ms,
  runtime_exec_count: count,
  runtime_exec_timeout_count: count,
  runtime_exec_failure_count: count,
  runtime_exec_exception_count: count,
  runtime_exec_cancelled_count: count,
  runtime_exec_ms_by_category: msMap,
  runtime_exec_count_by_category: msMap,
  mini_swe_command_ms: ms,
  mini_swe_command_count: count,
  mini_swe_command_timeout_count: count,
  mini_swe_command_failure_count: count,
  mini_swe_command_ms_by_category: msMap,
  mini_swe_command_count_by_category: msMap,
});
export type SessionTiming = z.infer<typeof SessionTiming>;
export const emptyTiming = (): SessionTiming => SessionTiming.parse({});

export const SessionResult = z.object({
  session_id: z.string(),
  task_id: z.string(),
  status: SessionStatus,
  trajectory: Trajectory,
  timing: SessionTiming.default(emptyTiming),
  node_id: z.string().nullable().default(null),
  error: z.string().nullable().default(null),
  metadata: Dict.default({}),
  /** Extensions. */
  attempt: z.number().int().min(1).default(1),
  agent_result: AgentRunResult.nullable().optional(),
  /** The raw captured session, kept so a trajectory can be rebuilt with another strategy. */
  completion_session: CompletionSession.nullable().optional(),
  /** The raw lease token of the attempt that produced this result (its sha256 is in the session's lease). */
  lease_token: z.string().max(128).optional(),
});
export type SessionResult = z.infer<typeof SessionResult>;

export const TASK_STATUSES = ["running", "completed", "failed", "cancelling", "cancelled"] as const;
export const TaskState = z.enum(TASK_STATUSES);
export type TaskState = z.infer<typeof TaskState>;

/** Per-session summary kept in the task record (results themselves live on POLAR_RESULTS). */
export const SessionSummary = z.object({
  session_id: z.string(),
  sample_index: z.number().int(),
  status: SessionStatus,
  attempt: z.number().int().default(1),
  node_id: z.string().nullable().default(null),
  reward: z.number().nullable().default(null),
  trace_count: z.number().int().default(0),
  prompt_tokens: z.number().int().default(0),
  response_tokens: z.number().int().default(0),
  error: z.string().nullable().default(null),
  result_seq: z.number().int().nullable().default(null),
  /** COMPLETED with at least one trace that has prompt ids, response ids and a trainable token. */
  usable: z.boolean().default(false),
});
export type SessionSummary = z.infer<typeof SessionSummary>;

export const TaskStatus = z.object({
  task_id: z.string(),
  status: TaskState,
  total_sessions: z.number().int(),
  completed_sessions: z.number().int(),
  /** SessionResults of the page's finished sessions, only when asked for (`with_results`). */
  results: z.array(SessionResult).default([]),
  result_paths: z.array(z.string()).default([]),
  /** Extensions. Session summaries of one page (by sample index: `offset`, `limit`). */
  sessions: z.array(SessionSummary).default([]),
  /** Finished sessions by status, and usable ones, over the whole task. */
  status_counts: z.record(z.string(), z.number().int()).optional(),
  usable_sessions: z.number().int().optional(),
  offset: z.number().int().optional(),
  limit: z.number().int().optional(),
  early_stopped_at: z.string().nullable().optional(),
  finished_at: z.string().nullable().optional(),
  created_at: z.string().optional(),
  updated_at: z.string().optional(),
  callback: z
    .object({ delivered: z.boolean(), attempts: z.number().int(), error: z.string().nullable() })
    .nullable()
    .optional(),
});
export type TaskStatus = z.infer<typeof TaskStatus>;

export const TaskResult = z.object({
  task_id: z.string(),
  status: z.string(),
  results: z.array(SessionResult),
  result_paths: z.array(z.string()).default([]),
  /** Extension: `<task_id>:<delivery id>`, the same on every retry of one delivery (also the `Idempotency-Key` header). */
  idempotency_key: z.string().optional(),
});
export type TaskResult = z.infer<typeof TaskResult>;

// ---------------------------------------------------------------- nodes

export const NodeStageMetrics = z.object({
  init_queue_depth: z.number().int().min(0).default(0),
  init_inflight: z.number().int().min(0).default(0),
  ready_depth: z.number().int().min(0).default(0),
  run_inflight: z.number().int().min(0).default(0),
  postrun_queue_depth: z.number().int().min(0).default(0),
  postrun_inflight: z.number().int().min(0).default(0),
  /** Sessions whose POSTRUN waits for an evaluator actor (holding no POSTRUN worker). */
  eval_waiting: z.number().int().min(0).default(0),
});
export type NodeStageMetrics = z.infer<typeof NodeStageMetrics>;

/** What a node reports: its stages plus its model traffic and throughput counters. */
export const NodeMetrics = NodeStageMetrics.extend({
  /** Model calls in flight to the upstream engines now. */
  upstream_inflight: z.number().int().min(0).default(0),
  /** Cumulative ms with at least one upstream call in flight (a reader derives the busy fraction). */
  upstream_busy_ms: z.number().min(0).default(0),
  /** Cumulative sessions this node finished (any terminal status). */
  sessions_finished: z.number().int().min(0).default(0),
  /** How late the node's event loop ran over its last 5 s window: p99 and max, ms (see util/loop-delay.ts). */
  loop_delay_p99_ms: z.number().min(0).default(0),
  loop_delay_max_ms: z.number().min(0).default(0),
});
export type NodeMetrics = z.infer<typeof NodeMetrics>;

export const NodeRegistration = z.object({
  /** Entries of `polar_nodes` are gateways or evaluators (see EvaluatorNodeInfo). */
  kind: z.literal("gateway").optional(),
  node_id: z.string().min(1),
  gateway_url: z.string(),
  max_init_workers: z.number().int().min(1),
  max_run_workers: z.number().int().min(1),
  max_postrun_workers: z.number().int().min(1),
  /** Sessions the READY buffer holds at most. */
  ready_capacity: z.number().int().min(0).optional(),
  heartbeat_interval_seconds: z.number().positive().default(30),
  pool: z.string().default("default"),
  started_at: z.string().optional(),
});
export type NodeRegistration = z.infer<typeof NodeRegistration>;

export const NodeHeartbeat = z.object({
  node_id: z.string().min(1),
  metrics: NodeMetrics,
  sent_at: z.string(),
  draining: z.boolean().default(false),
  /** The node's heartbeat interval, so a monitor knows when beats are missing. */
  interval_ms: z.number().int().min(1).max(3_600_000).optional(),
});
export type NodeHeartbeat = z.infer<typeof NodeHeartbeat>;

export const GatewayNodeInfo = NodeRegistration.extend({
  metrics: NodeMetrics.default(NodeMetrics.parse({})),
  healthy: z.boolean(),
  draining: z.boolean().default(false),
  last_heartbeat: z.string(),
});
export type GatewayNodeInfo = z.infer<typeof GatewayNodeInfo>;

// ---------------------------------------------------------------- evaluator actors

export const EvaluatorMetrics = z.object({
  inflight: z.number().int().min(0).default(0),
  completed: z.number().int().min(0).default(0),
  failed: z.number().int().min(0).default(0),
  /** Requests taken over from an evaluator that died (delivered more than once). */
  redelivered: z.number().int().min(0).default(0),
  /** Requests whose budget had run out before evaluation started. */
  expired: z.number().int().min(0).default(0),
  eval_ms_total: z.number().min(0).default(0),
});
export type EvaluatorMetrics = z.infer<typeof EvaluatorMetrics>;

export const EvaluatorNodeInfo = z.object({
  kind: z.literal("evaluator"),
  node_id: z.string().min(1),
  pool: z.string().default("default"),
  max_concurrency: z.number().int().min(1),
  /** The gateway this evaluator runs inside, or null for a standalone `polar evaluator`. */
  hosted_by: z.string().nullable().default(null),
  host: z.string().default(""),
  heartbeat_interval_seconds: z.number().positive().default(30),
  started_at: z.string().optional(),
  metrics: EvaluatorMetrics.default(EvaluatorMetrics.parse({})),
  healthy: z.boolean(),
  draining: z.boolean().default(false),
  last_heartbeat: z.string(),
});
export type EvaluatorNodeInfo = z.infer<typeof EvaluatorNodeInfo>;

/** POSTRUN → evaluators (`polar.eval.request.<pool>`, work queue): evaluate one session attempt. */
export const EvalRequest = z.object({
  session_id: Id,
  task_id: Id,
  attempt: z.number().int().min(1).max(1000),
  /** The gateway waiting for the result. */
  node_id: z.string().min(1).max(128),
  evaluator: EvaluatorSpec,
  /** The session's runtime spec: the evaluator starts a fresh runtime of it. */
  runtime: RuntimeSpec,
  /** What the evaluator took from the agent's runtime (e.g. the patch). */
  collected: z.unknown().default(null),
  trajectory_status: TrajectoryStatus,
  agent_result: AgentRunResult.nullable().default(null),
  /** The session budget bounds the evaluation: past this instant nobody waits for it. */
  deadline_at: z.iso.datetime({ offset: true }),
  created_at: z.iso.datetime({ offset: true }),
});
export type EvalRequest = z.infer<typeof EvalRequest>;

export const EvalTiming = z.object({
  eval_container_start_ms: z.number().min(0).default(0),
  eval_prepare_ms: z.number().min(0).default(0),
  eval_runtime_stop_ms: z.number().min(0).default(0),
  /** Published → picked up by an evaluator. */
  eval_queue_ms: z.number().min(0).default(0),
  eval_ms: z.number().min(0).default(0),
});
export type EvalTiming = z.infer<typeof EvalTiming>;

/** Evaluator → POSTRUN (`polar.eval.result.<session_id>`, kept on POLAR_EVAL_RESULTS). */
export const EvalReply = z.object({
  session_id: Id,
  task_id: Id,
  attempt: z.number().int().min(1).max(1000),
  evaluator_node_id: z.string().min(1).max(128),
  /** How many times the request was delivered (more than 1: an evaluator died on it). */
  delivery_count: z.number().int().min(1).default(1),
  result: EvalResult.nullable().default(null),
  /** Set instead of `result` when evaluation failed; `code` is from the error catalogue. */
  error: z
    .object({ code: z.string().min(1).max(64), message: z.string().max(16_384), retryable: z.boolean().default(false) })
    .nullable()
    .default(null),
  timing: EvalTiming.default(EvalTiming.parse({})),
  finished_at: z.string(),
});
export type EvalReply = z.infer<typeof EvalReply>;

// ---------------------------------------------------------------- API envelopes

export const TaskRef = z.object({ task_id: Id });
/** One session of a task (the dashboard's trace view). */
export const SessionRef = TaskRef.extend({ session_id: Id });
/** `polar.api.task.get`: a status poll; SessionResults only on request, one page at a time. */
export const TaskGet = TaskRef.extend({
  with_results: z.boolean().default(false),
  offset: z.number().int().min(0).max(LIMITS.num_samples).default(0),
  limit: z.number().int().min(1).max(LIMITS.num_samples).default(1000),
});
export type TaskGet = z.input<typeof TaskGet>;
export const CancelRequest = TaskRef.extend({ register_if_missing: z.boolean().default(false) });
export const SubmitReply = z.object({ task_id: z.string(), status: z.string(), total_sessions: z.number().int() });
export type SubmitReply = z.infer<typeof SubmitReply>;

export const SystemStatus = z.object({
  pending_sessions: z.number().int(),
  running_tasks: z.number().int(),
  nodes: z.array(GatewayNodeInfo),
  /** Extension: evaluator actors (standalone and hosted by gateways). */
  evaluators: z.array(EvaluatorNodeInfo).default([]),
  /** Extension: evaluation requests waiting on POLAR_EVALS. */
  pending_evaluations: z.number().int().min(0).default(0),
  /** Extension: pools with sessions waiting and no live gateway serving them. */
  unserved_pools: z.array(z.object({ pool: z.string(), pending_sessions: z.number().int() })).default([]),
});

// ---------------------------------------------------------------- leases and views


/** What gateways need to know about a task (`polar_task_flags`, written by the supervisor). */
export const TaskFlags = z.object({
  task_id: z.string(),
  status: TaskState,
  early_stopped_at: z.string().nullable().default(null),
});
export type TaskFlags = z.infer<typeof TaskFlags>;
export type SystemStatus = z.infer<typeof SystemStatus>;

/** Drain one gateway: pull nothing more, finish what it holds within the timeout, publish, leave. */
export const NodeDrainRequest = z.strictObject({
  node_id: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/, "must match ^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$"),
  /** Default: the gateway's configured drain timeout. At most 7 days. */
  timeout_seconds: z.number().positive().max(7 * 24 * 3600).optional(),
});
export type NodeDrainRequest = z.infer<typeof NodeDrainRequest>;

export const NodeDrainReply = z.object({
  node_id: z.string(),
  draining: z.boolean(),
  /** Sessions the node held when the drain began (they finish, or are requeued at the timeout). */
  held_sessions: z.number().int(),
  timeout_seconds: z.number(),
});
export type NodeDrainReply = z.infer<typeof NodeDrainReply>;

/** A message too large for NATS carries this instead of its body (header `polar-blob`). */
export const BlobRef = z.object({ blob: z.string(), size: z.number().int() });
export type BlobRef = z.infer<typeof BlobRef>;

// ---------------------------------------------------------------- inference control (weight sync)

const PolicyVersion = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

/** `polar_control` KV, key `inference`: what every gateway follows (and reads when it joins). */
export const ControlState = z.object({
  paused: z.boolean(),
  policy_version: PolicyVersion,
  paused_at: z.string().nullable().default(null),
  updated_at: z.string(),
});
export type ControlState = z.infer<typeof ControlState>;

export const PauseRequest = z.strictObject({
  /** How long each gateway waits for its in-flight upstream calls to finish (default 60, at most 3600). */
  timeout_seconds: z.number().positive().max(3600).optional(),
});
export type PauseRequest = z.infer<typeof PauseRequest>;

export const ResumeRequest = z.strictObject({
  /** The policy version from now on; never lower than the current one. */
  policy_version: PolicyVersion,
});
export type ResumeRequest = z.infer<typeof ResumeRequest>;

/** The supervisor's command to one gateway (`polar.node.inference.<node_id>`). */
export const NodeInferenceCommand = z.discriminatedUnion("op", [
  z.object({ op: z.literal("pause"), timeout_ms: z.number().int().min(0).max(3_600_000) }),
  z.object({ op: z.literal("resume"), policy_version: PolicyVersion }),
]);
export type NodeInferenceCommand = z.infer<typeof NodeInferenceCommand>;

/** One gateway's answer: what it drained (pause) or released (resume). */
export const NodeInferenceReply = z.object({
  node_id: z.string(),
  ok: z.boolean().default(true),
  paused: z.boolean(),
  policy_version: PolicyVersion,
  /** Pause: upstream calls that were in flight when the pause began and finished before the reply. */
  drained: z.number().int().min(0).default(0),
  /** Calls held at the gate right now (pause) or just before the release (resume). */
  held: z.number().int().min(0).default(0),
  /** Resume: calls released. */
  released: z.number().int().min(0).default(0),
  /** Pause: upstream calls still in flight when the reply was sent (non-zero only on a drain timeout). */
  inflight: z.number().int().min(0).default(0),
  drain_timed_out: z.boolean().default(false),
  drain_ms: z.number().min(0).default(0),
  /** The engines' own pause/resume, when forwarding is configured: one entry per upstream. */
  engines: z.array(z.object({ url: z.string(), ok: z.boolean(), status: z.number().int().nullable(), error: z.string().nullable() })).default([]),
  error: z.string().nullable().default(null),
});
export type NodeInferenceReply = z.infer<typeof NodeInferenceReply>;

export const InferenceReply = z.object({
  paused: z.boolean(),
  policy_version: PolicyVersion,
  /** Pause: true when the cluster was already paused (the answer is idempotent). Resume: true when it was not paused. */
  unchanged: z.boolean(),
  paused_at: z.string().nullable(),
  /** Resume: how long the cluster was paused. */
  paused_ms: z.number().min(0).nullable().default(null),
  nodes: z.array(NodeInferenceReply),
  drained: z.number().int().min(0),
  held: z.number().int().min(0),
  released: z.number().int().min(0),
});
export type InferenceReply = z.infer<typeof InferenceReply>;
// ---------------------------------------------------------------- leases

/** Which node holds which attempt of a session (KV `polar_leases`, key `leaseKey(session_id)`). */
export const SessionLease = z.object({
  session_id: z.string(),
  task_id: z.string(),
  attempt: z.number().int().min(0),
  node_id: z.string(),
  /** When the gateway started INIT of this attempt (ISO). */
  init_at: z.string(),
  /** init_at plus the session budget (ISO). */
  deadline_at: z.string(),
  /** Hex sha256 of the attempt's random lease token; only the holding gateway knows the token. */
  token_sha256: z.string().regex(/^[0-9a-f]{64}$/),
  updated_at: z.string(),
  /** Reply subject of the dispatch delivery this attempt holds, so the supervisor can release it at once when the node is gone. */
  ack_subject: z.string().max(512).optional(),
  /**
   * Set by the supervisor once it recorded the session's terminal result: the
   * session is done, so no attempt may take it again (a delivery redelivered
   * around an outage is dropped instead of run) and the holder's renewal fails.
   */
  finished_at: z.string().optional(),
});
export type SessionLease = z.infer<typeof SessionLease>;
