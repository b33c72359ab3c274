/**
 * Process configuration: one strict schema, parsed once at the entry point,
 * frozen, passed down. Unknown keys fail with the path of the key.
 */
import { readFile } from "node:fs/promises";
import { z } from "zod";
import { validate } from "../protocol/codec.ts";
import { ValidationError } from "../protocol/errors.ts";
import { NatsAuth } from "../security/nats-auth.ts";

const Proxy = z.strictObject({
  host: z.string().default("127.0.0.1"),
  port: z.number().int().min(0).max(65535).default(0),
  upstreams: z.array(z.url()).default([]),
  flavor: z.enum(["vllm", "sglang"]).default("vllm"),
  model_served: z.string().default("Qwen/Qwen3-8B"),
  max_body_bytes: z.number().int().positive().default(32 * 1024 * 1024),
  upstream_timeout_ms: z.number().int().positive().default(900_000),
  /** "auto": a session's credential works only from its own sandbox (its socket or process tree); "off": from anywhere. */
  bind_credentials: z.enum(["auto", "off"]).default("auto"),
});

const Gateway = z.strictObject({
  node_id: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/).optional(),
  pool: z.string().default("default"),
  max_init_workers: z.number().int().min(1).default(4),
  max_run_workers: z.number().int().min(1).default(2),
  max_postrun_workers: z.number().int().min(1).default(4),
  ready_capacity: z.number().int().min(1).max(100_000).optional(),
  /** Pulled sessions that may wait for an INIT worker (default 0). */
  init_queue_capacity: z.number().int().min(0).max(100_000).optional(),
  /** Sessions whose agent finished that may wait for a POSTRUN worker (default: max_postrun_workers). */
  postrun_queue_capacity: z.number().int().min(0).max(100_000).optional(),
  /** INIT and RUN share the max_run_workers pool: a session holds one worker from INIT to the end of its run (unstaged; default false). */
  shared_init_run: z.boolean().default(false),
  heartbeat_interval_ms: z.number().int().min(100).default(5000),
  work_root: z.string().optional(),
  tools_dir: z.string().optional(),
  keep_session_dirs: z.boolean().default(false),
  /** SIGTERM or a drain request: held sessions get this long to finish before they are requeued. */
  drain_timeout_seconds: z.number().positive().max(7 * 24 * 3600).default(300),
  default_runtime: z.record(z.string(), z.unknown()).default({ backend: "local" }),
  proxy: Proxy.default(() => Proxy.parse({})),
  /** Remote-capable evaluations with refresh_runtime go to evaluator actors (false: evaluated in this gateway). */
  remote_evaluation: z.boolean().default(true),
  /** The evaluator actor the gateway hosts (remote evaluators of its pool). */
  evaluator: z
    .strictObject({ enabled: z.boolean().default(true), max_concurrency: z.number().int().min(1).max(256).default(2) })
    .default({ enabled: true, max_concurrency: 2 }),
});

/** A standalone evaluator (`polar evaluator`). */
const Evaluator = z.strictObject({
  node_id: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/).optional(),
  pool: z.string().default("default"),
  max_concurrency: z.number().int().min(1).max(256).default(2),
  heartbeat_interval_ms: z.number().int().min(100).default(5000),
  work_root: z.string().optional(),
  tools_dir: z.string().optional(),
});

/** Security settings (see SECURITY.md). */
const Security = z.strictObject({
  /** Host directories tasks may upload from (prepare upload_file/upload_dir, agent.skills_path); default: polar's example files. */
  upload_roots: z.array(z.string().min(1)).optional(),
  /** Hosts (`name`, `addr` or `host:port`) callbacks may go to; empty: any host except link-local and this host's polar ports. */
  callback_allow_hosts: z.array(z.string().min(1)).default([]),
  callback_allow_link_local: z.boolean().default(false),
  /** Bearer tokens of the HTTP API: trainer (everything) and observer (GET only). Required unless it listens on loopback. */
  api_tokens: z
    .strictObject({ trainer: z.array(z.string().min(16)).default([]), observer: z.array(z.string().min(16)).default([]) })
    .default({ trainer: [], observer: [] }),
  /** This actor's NATS credentials and TLS (else POLAR_NATS_* from the environment). */
  nats_auth: NatsAuth.optional(),
  /**
   * Variables of the gateway's environment every agent gets (API keys of tools the agent calls):
   * their values stay on the gateway host and are redacted from logs, step logs and results.
   */
  secret_env_names: z.array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name")).max(256).default([]),
});

export const PolarConfig = z.strictObject({
  /** One server URL, a comma-separated list, or a list (members of one NATS cluster). */
  nats_url: z.union([z.string().min(1), z.array(z.string().min(1)).min(1).max(64)]).optional(),
  supervisor: z
    .strictObject({
      http_host: z.string().default("127.0.0.1"),
      http_port: z.number().int().min(0).max(65535).default(8080),
      result_grace_ms: z.number().int().positive().default(120_000),
    })
    .default({ http_host: "127.0.0.1", http_port: 8080, result_grace_ms: 120_000 }),
  gateway: Gateway.default(() => Gateway.parse({})),
  security: Security.default(() => Security.parse({})),
  evaluator: Evaluator.default(() => Evaluator.parse({})),
  infra: z
    .strictObject({
      dispatch_ack_wait_ms: z.number().int().min(500).default(30_000),
      max_deliver: z.number().int().min(1).default(5),
      node_ttl_ms: z.number().int().min(1000).default(90_000),
      /** Copies of streams, KV buckets and the object store (JetStream allows 1 to 5; use 3 on a 3-node cluster). */
      replicas: z.number().int().min(1).max(5).default(1),
      eval_ack_wait_ms: z.number().int().min(500).default(30_000),
      eval_max_deliver: z.number().int().min(1).default(5),
      /** Per stream/bucket (sessions, results, traces, evals, evalResults, tasks, nodes, blobs, leases, taskFlags, control), any subset: 0 = unlimited. */
      retention: z
        .partialRecord(
          z.enum(["sessions", "results", "traces", "evals", "evalResults", "tasks", "nodes", "blobs", "leases", "taskFlags", "control"]),
          z.strictObject({ max_age_ms: z.number().int().min(0).optional(), max_bytes: z.number().int().min(0).optional() }),
        )
        .optional(),
    })
    .default({ dispatch_ack_wait_ms: 30_000, max_deliver: 5, node_ttl_ms: 90_000, replicas: 1, eval_ack_wait_ms: 30_000, eval_max_deliver: 5 }),
});
export type PolarConfig = z.infer<typeof PolarConfig>;

export async function loadConfig(path?: string): Promise<Readonly<PolarConfig>> {
  let raw: unknown = {};
  if (path) {
    const text = await readFile(path, "utf8").catch((err) => {
      throw new ValidationError("config", [{ path: "", message: `cannot read ${path}: ${(err as Error).message}` }]);
    });
    try {
      raw = JSON.parse(text);
    } catch {
      throw new ValidationError("config", [{ path: "", message: `${path} is not valid JSON` }]);
    }
  }
  return deepFreeze(validate(PolarConfig, raw, `config ${path ?? "(defaults)"}`));
}

function deepFreeze<T>(o: T): T {
  if (o && typeof o === "object") {
    for (const v of Object.values(o)) deepFreeze(v);
    Object.freeze(o);
  }
  return o;
}

export function gatewayOptionsFrom(c: PolarConfig) {
  const g = c.gateway;
  return {
    nodeId: g.node_id,
    pool: g.pool,
    limits: {
      maxInitWorkers: g.max_init_workers,
      maxRunWorkers: g.max_run_workers,
      maxPostrunWorkers: g.max_postrun_workers,
      readyCapacity: g.ready_capacity,
      initQueueCapacity: g.init_queue_capacity,
      postrunQueueCapacity: g.postrun_queue_capacity,
      sharedInitRun: g.shared_init_run,
    },
    heartbeatIntervalMs: g.heartbeat_interval_ms,
    workRoot: g.work_root,
    toolsDir: g.tools_dir,
    keepSessionDirs: g.keep_session_dirs,
    drainTimeoutMs: g.drain_timeout_seconds * 1000,
    defaultRuntime: g.default_runtime,
    proxy: {
      host: g.proxy.host,
      port: g.proxy.port,
      upstreams: [...g.proxy.upstreams],
      flavor: g.proxy.flavor,
      modelServed: g.proxy.model_served,
      maxBodyBytes: g.proxy.max_body_bytes,
      upstreamTimeoutMs: g.proxy.upstream_timeout_ms,
      bindCredentials: g.proxy.bind_credentials,
    },
    infra: infraOptionsFrom(c),
    evaluator: g.evaluator.enabled ? { maxConcurrency: g.evaluator.max_concurrency } : (false as const),
    remoteEvaluation: g.remote_evaluation,
    uploadRoots: c.security.upload_roots ? [...c.security.upload_roots] : undefined,
    secretEnvNames: [...c.security.secret_env_names],
  };
}

/** The supervisor's security options from the config. */
export function supervisorSecurityFrom(c: PolarConfig) {
  return {
    uploadRoots: c.security.upload_roots ? [...c.security.upload_roots] : undefined,
    callback: { policy: { allowHosts: [...c.security.callback_allow_hosts], allowLinkLocal: c.security.callback_allow_link_local } },
    apiTokens: { trainer: [...c.security.api_tokens.trainer], observer: [...c.security.api_tokens.observer] },
  };
}

export function evaluatorOptionsFrom(c: PolarConfig) {
  const e = c.evaluator;
  return {
    nodeId: e.node_id,
    pool: e.pool,
    maxConcurrency: e.max_concurrency,
    heartbeatIntervalMs: e.heartbeat_interval_ms,
    workRoot: e.work_root,
    toolsDir: e.tools_dir,
    infra: infraOptionsFrom(c),
  };
}

export function infraOptionsFrom(c: PolarConfig) {
  return {
    dispatchAckWaitMs: c.infra.dispatch_ack_wait_ms,
    maxDeliver: c.infra.max_deliver,
    nodeTtlMs: c.infra.node_ttl_ms,
    evalAckWaitMs: c.infra.eval_ack_wait_ms,
    evalMaxDeliver: c.infra.eval_max_deliver,
    replicas: c.infra.replicas,
    retention: Object.fromEntries(
      Object.entries(c.infra.retention ?? {}).map(([k, v]) => [k, { maxAgeMs: v.max_age_ms, maxBytes: v.max_bytes }]),
    ),
  };
}
