/**
 * The Supervisor actor: the task API (NATS request/reply and HTTP), session
 * expansion and dispatch, durable task state, result and trace streams,
 * callbacks. All state lives in JetStream, so a restarted supervisor picks
 * up where the last one stopped.
 */
import type { Server } from "node:http";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "pino";
import { decode, encode } from "../../protocol/codec.ts";
import { errorMessage } from "../../protocol/errors.ts";
import { emptyTiming, TERMINAL_STATUSES, type SessionResult } from "../../protocol/schemas.ts";
import { SUBJECTS, type EventKind } from "../../protocol/subjects.ts";
import { ensureResultsConsumer, openInfra, type Infra, type InfraOptions } from "../../nats/infra.ts";
import { publishDurable, serveRequests } from "../../nats/messages.ts";
import { closeServer, listen } from "../../util/http.ts";
import { actorHandle, type ActorHandle } from "../lifecycle.ts";
import { DEFAULT_CALLBACK, postCallback, type CallbackOptions } from "./callback.ts";
import { createApiServer } from "./http.ts";
import { consumeResults } from "./results.ts";
import { followDeadLetters } from "./dead-letters.ts";
import { drainNode } from "./drain.ts";
import { TaskStore, type TaskRecord } from "./task-store.ts";
import { TaskService, type LiveState, type SpecChecker } from "./tasks.ts";
import { submitChecks } from "./admission.ts";
import { DEFAULT_CALLBACK_POLICY, type CallbackPolicy } from "../../security/callback-policy.ts";
import { DEFAULT_UPLOAD_ROOTS } from "../../security/upload-roots.ts";
import { supervisorMetrics } from "../../metrics/supervisor.ts";
import { readControl } from "../../nats/control-state.ts";
import { InferenceService } from "./inference.ts";
import { apiTokensWithEnv, assertApiExposure, type ApiTokens } from "../../security/http-auth.ts";

export interface SupervisorDeps {
  nc: NatsConnection;
  log: Logger;
  /** Validates strategy names/configs at submit time (registries). */
  check?: SpecChecker;
}

export interface SupervisorOptions {
  /** HTTP API; `undefined` port means no HTTP server. */
  http?: { host: string; port: number };
  /** Bearer tokens of the HTTP API (plus POLAR_API_TOKEN / POLAR_API_OBSERVER_TOKEN); required unless it listens on loopback. */
  apiTokens?: ApiTokens;
  infra?: InfraOptions;
  callback?: Partial<Omit<CallbackOptions, "policy">> & { policy?: Partial<CallbackPolicy> };
  /** Host directories `upload_file`/`upload_dir`/`skills_path` may name (default: polar's example files). */
  uploadRoots?: readonly string[];
  /** Sessions with no result this long after their task budget are given a TIMEOUT result. */
  resultGraceMs?: number;
  sweepIntervalMs?: number;
  /** Refuse gateway results for sessions that hold no lease (default false: leases are verified whenever present). */
  requireLease?: boolean;
}

export interface SupervisorHandle extends ActorHandle {
  readonly httpUrl?: string;
  readonly tasks: TaskService;
  /** Prometheus text of the supervisor (also served at `GET /metrics`). */
  prometheus(): Promise<string>;
  readonly inference: InferenceService;
}

export async function startSupervisor(deps: SupervisorDeps, opts: SupervisorOptions = {}): Promise<SupervisorHandle> {
  const log = deps.log.child({ actor: "supervisor" });
  const apiTokens = apiTokensWithEnv(opts.apiTokens);
  if (opts.http) assertApiExposure(opts.http.host, apiTokens);
  const infra = await openInfra(deps.nc, opts.infra);
  await ensureResultsConsumer(infra.jsm);
  const store = new TaskStore(infra.tasks);
  const live = new Map<string, LiveState>();
  // The task service exists only below; the metrics read it when scraped.
  let taskRef: TaskService | undefined;
  const metrics = supervisorMetrics({
    liveStages: () => {
      const by = new Map<string, number>();
      for (const s of live.values()) if (!TERMINAL_STATUSES.has(s.status)) by.set(s.status, (by.get(s.status) ?? 0) + 1);
      return by;
    },
    queue: () => taskRef!.status(),
    nodes: () => taskRef!.nodes(),
    policyVersion: async () => (await readControl(infra.control)).state.policy_version,
  });
  const emit = (kind: EventKind, body: unknown) => {
    metrics.observe(kind, body);
    deps.nc.publish(SUBJECTS.event(kind), encode(body));
  };
  const abort = new AbortController();
  // This host's NATS and API ports are never a callback target (the API port is known once listening).
  const localPorts = [deps.nc.info?.port].filter((p): p is number => typeof p === "number");
  const policy: CallbackPolicy = { ...DEFAULT_CALLBACK_POLICY, ...opts.callback?.policy, localPorts };
  const callbackOpts = { ...DEFAULT_CALLBACK, ...opts.callback, policy };
  const admit = submitChecks(deps.check, opts.uploadRoots ?? DEFAULT_UPLOAD_ROOTS, policy);
  const tasks = new TaskService({ infra, store, log, check: admit, emit, live });
  taskRef = tasks;
  const inference = new InferenceService({ nc: deps.nc, control: infra.control, nodes: () => tasks.nodes(), log });

  const onTaskDone = async (rec: TaskRecord) => {
    emit("task.done", { task_id: rec.request.task_id, status: rec.status });
    log.info({ task_id: rec.request.task_id, status: rec.status }, "task finished");
    const url = rec.request.callback_url;
    if (!url) return;
    const status = await tasks.toStatus(rec, true);
    const result = { task_id: status.task_id, status: status.status, results: status.results, result_paths: [] };
    const outcome = await postCallback(url, result, callbackOpts, log, abort.signal);
    await store.update(rec.request.task_id, (r) => {
      r.callback = outcome;
      return true;
    });
  };

  const subs = [
    serveRequests(deps.nc, SUBJECTS.api.submit, (b) => tasks.submit(b), log),
    serveRequests(deps.nc, SUBJECTS.api.get, (b) => tasks.get(b), log),
    serveRequests(deps.nc, SUBJECTS.api.cancel, (b) => tasks.cancel(b), log),
    serveRequests(deps.nc, SUBJECTS.api.status, () => tasks.status(), log),
    serveRequests(deps.nc, SUBJECTS.api.nodeDrain, (b) => drainNode(deps.nc, b), log),
    serveRequests(deps.nc, SUBJECTS.api.inferencePause, (b) => inference.pause(b), log),
    serveRequests(deps.nc, SUBJECTS.api.inferenceResume, (b) => inference.resume(b), log),
    followSessions(deps.nc, live, log),
    followDeadLetters(deps.nc, infra, log),
  ];
  const consuming = consumeResults({ infra, store, log, onTaskDone, emit, requireLease: opts.requireLease }, abort.signal).catch((err) => {
    if (!abort.signal.aborted) log.error({ err }, "results consumer stopped");
  });

  await recover(tasks, store, log, onTaskDone);
  const sweepTimer = setInterval(
    () => void sweep(infra, store, log, opts.resultGraceMs ?? 120_000).catch((err) => log.warn({ err }, "sweep failed")),
    opts.sweepIntervalMs ?? 5_000,
  );
  sweepTimer.unref();

  let server: Server | undefined;
  let httpUrl: string | undefined;
  if (opts.http) {
    server = createApiServer(tasks, deps.nc, log, { metrics: metrics.registry, inference, tokens: apiTokens });
    const port = await listen(server, opts.http.port, opts.http.host);
    localPorts.push(port);
    httpUrl = `http://${opts.http.host === "0.0.0.0" ? "127.0.0.1" : opts.http.host}:${port}`;
  }
  log.info({ httpUrl }, "supervisor started");

  return actorHandle(
    { httpUrl, tasks, inference, prometheus: () => metrics.registry.metrics() },
    [
      () => server && closeServer(server),
      () => clearInterval(sweepTimer),
      () => abort.abort(new Error("supervisor stopping")),
      () => Promise.all(subs.map((s) => s.drain())),
      () => consuming,
    ],
    (err) => log.warn({ err }, "supervisor stop step failed"),
  );
}

/** Keeps the live stage of each running session (core NATS events; losing one only delays the display). */
function followSessions(nc: NatsConnection, live: Map<string, LiveState>, log: Logger) {
  return nc.subscribe(SUBJECTS.event("session.state_changed"), {
    callback: (err, msg) => {
      if (err) return log.warn({ err }, "session event subscription failed");
      try {
        const ev = decode(msg.data) as { session_id: string; status: LiveState["status"]; attempt: number; node_id?: string };
        live.set(ev.session_id, { status: ev.status, attempt: ev.attempt, node_id: ev.node_id ?? null });
        // A finished session's result lands within moments; then the durable summary speaks for it.
        if (TERMINAL_STATUSES.has(ev.status)) setTimeout(() => live.delete(ev.session_id), 60_000).unref();
      } catch (e) {
        log.warn({ err: e }, "malformed session event");
      }
    },
  });
}

/** After a restart: finish dispatching interrupted submits and deliver missed callbacks. */
async function recover(tasks: TaskService, store: TaskStore, log: Logger, onTaskDone: (r: TaskRecord) => Promise<void>) {
  for await (const rec of store.list()) {
    try {
      if (rec.status === "running" && !rec.dispatched) {
        log.info({ task_id: rec.request.task_id }, "re-dispatching an interrupted submit");
        await tasks.dispatch(rec);
      } else if ((rec.status === "completed" || rec.status === "cancelled") && rec.callback == null && rec.sessions.length) {
        void onTaskDone(rec).catch((err) => log.warn({ err }, "callback after restart failed"));
      }
    } catch (err) {
      log.error({ err: errorMessage(err), task_id: rec.request.task_id }, "recovery of a task failed");
    }
  }
}

/**
 * Gives sessions that can no longer report (budget long exhausted, gateway
 * gone, deliveries exhausted) a TIMEOUT result, through the normal results
 * path so that every task ends.
 */
async function sweep(infra: Infra, store: TaskStore, log: Logger, graceMs: number): Promise<void> {
  const now = Date.now();
  for await (const rec of store.list()) {
    if (rec.status !== "running" && rec.status !== "cancelling") continue;
    const deadline = Date.parse(rec.created_at) + rec.request.timeout_seconds * 1000 + graceMs;
    if (now < deadline) continue;
    for (const s of rec.sessions) {
      if (TERMINAL_STATUSES.has(s.status)) continue;
      const result: SessionResult = {
        session_id: s.session_id,
        task_id: rec.request.task_id,
        status: "TIMEOUT",
        trajectory: { status: "TIMEOUT", metadata: {}, traces: [], error: "no session result within the task budget" },
        timing: emptyTiming(),
        node_id: null,
        error: "no session result within the task budget",
        metadata: rec.request.metadata,
        attempt: Math.max(1, s.attempt),
      };
      log.warn({ task_id: rec.request.task_id, session_id: s.session_id }, "session overdue: recording TIMEOUT");
      await publishDurable(infra, SUBJECTS.supervisorResult(rec.request.task_id), result, `${s.session_id}:overdue`);
    }
  }
}
