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
import { TERMINAL_STATUSES, type TaskResult } from "../../protocol/schemas.ts";
import { SUBJECTS, type EventKind } from "../../protocol/subjects.ts";
import { ensureResultsConsumer, openInfra, RESULT_MAX_DELIVER, type InfraOptions } from "../../nats/infra.ts";
import { serveRequests } from "../../nats/messages.ts";
import { MAX_TIMER_MS } from "../gateway/budget.ts";
import { closeServer, listen } from "../../util/http.ts";
import { actorHandle, type ActorHandle } from "../lifecycle.ts";
import { DEFAULT_CALLBACK, postCallback, type CallbackOptions } from "./callback.ts";
import { createApiServer } from "./http.ts";
import { consumeResults } from "./results.ts";
import { followDeadLetters } from "./dead-letters.ts";
import { drainNode } from "./drain.ts";
import { TaskStore, type SessionEntry, type TaskHeader } from "./task-store.ts";
import { recover, sweep } from "./sweep.ts";
import { TaskService, type LiveState, type SpecChecker } from "./tasks.ts";
import { submitChecks } from "./admission.ts";
import { startNodeMonitor, type LivenessOptions } from "./node-monitor.ts";
import { DEFAULT_CALLBACK_POLICY, type CallbackPolicy } from "../../security/callback-policy.ts";
import { DEFAULT_UPLOAD_ROOTS } from "../../security/upload-roots.ts";
import { supervisorMetrics } from "../../metrics/supervisor.ts";
import { readControl } from "../../nats/control-state.ts";
import { InferenceService } from "./inference.ts";
import { registerSecret } from "../../security/redact.ts";
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
  /** Sessions with no result this long after their lease's deadline are given a TIMEOUT result. */
  resultGraceMs?: number;
  sweepIntervalMs?: number;
  /**
   * Refuse gateway results for sessions that hold no lease (default true: every gateway takes the
   * session's lease before it runs an attempt). `false` accepts unleased results (gateways older
   * than leases); a lease, when present, is verified either way.
   */
  requireLease?: boolean;
  /** Results consumer: deliveries of one result before it is recorded as ERROR (at most 10), first retry delay. */
  results?: { maxDeliver?: number; retryBaseMs?: number };
  /** When a gateway whose heartbeats stopped is taken for gone (its sessions are then released at once). */
  liveness?: Partial<LivenessOptions> & { checkEveryMs?: number };
}

export interface SupervisorHandle extends ActorHandle {
  readonly httpUrl?: string;
  readonly tasks: TaskService;
  /** Prometheus text of the supervisor (also served at `GET /metrics`). */
  prometheus(): Promise<string>;
  readonly inference: InferenceService;
  /** Records the sweep skipped, results given up on after their last delivery. */
  readonly stats: { sweep_errors: number; unprocessable_results: number };
}

export async function startSupervisor(deps: SupervisorDeps, opts: SupervisorOptions = {}): Promise<SupervisorHandle> {
  const log = deps.log.child({ actor: "supervisor" });
  const apiTokens = apiTokensWithEnv(opts.apiTokens);
  registerSecret(...(apiTokens?.trainer ?? []), ...(apiTokens?.observer ?? []));
  if (opts.http) assertApiExposure(opts.http.host, apiTokens);
  const infra = await openInfra(deps.nc, opts.infra);
  await ensureResultsConsumer(infra.jsm);
  const maxValueBytes = (deps.nc.info?.max_payload ?? 1024 * 1024) - 16 * 1024;
  const store = new TaskStore(infra.tasks, { flags: infra.taskFlags, leader: infra.tasksLeader, maxValueBytes, log });
  const stats = { sweep_errors: 0, unprocessable_results: 0 };
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

  /** A task became final: announce it, deliver its callback (once per run, whatever restarts), leave the live index. */
  const delivering = new Set<string>();
  const deliver = async (h: TaskHeader) => {
    const taskId = h.request.task_id;
    emit("task.done", { task_id: taskId, status: h.status });
    log.info({ task_id: taskId, status: h.status }, "task finished");
    const url = h.request.callback_url;
    if (url) {
      const sessions: SessionEntry[] = [];
      for await (const s of store.sessions(h)) sessions.push(s);
      const results = await tasks.results(sessions);
      // One delivery per run of the task id: every retry (and a restarted supervisor) sends the same key.
      const result: TaskResult = { task_id: taskId, status: h.status, results, result_paths: [], idempotency_key: `${taskId}:${h.run}` };
      const outcome = await postCallback(url, result, callbackOpts, log, abort.signal);
      await store.updateHeader(taskId, (r) => {
        if (r.run !== h.run) return false;
        r.callback = outcome;
        return true;
      });
    }
    await store.removeLive(taskId);
  };
  const onTaskDone = (h: TaskHeader) => {
    const key = `${h.request.task_id}:${h.run}`;
    if (delivering.has(key)) return;
    delivering.add(key);
    void deliver(h)
      .catch((err) => log.error({ task_id: h.request.task_id, err: errorMessage(err) }, "finishing a task failed (retried after a restart)"))
      .finally(() => delivering.delete(key));
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
  const consuming = consumeResults(
    {
      infra,
      store,
      log,
      onTaskDone,
      emit,
      stats,
      requireLease: opts.requireLease,
      maxDeliver: Math.min(RESULT_MAX_DELIVER, opts.results?.maxDeliver ?? RESULT_MAX_DELIVER),
      retryBaseMs: opts.results?.retryBaseMs,
    },
    abort.signal,
  ).catch((err) => {
    if (!abort.signal.aborted) log.error({ err }, "results consumer stopped");
  });

  const monitor = startNodeMonitor(
    {
      nc: deps.nc,
      infra,
      log,
      emit,
      // Its sessions wait for redelivery now: they no longer show the gone node's stage.
      onGone: (nodeId) => {
        for (const [sid, st] of live) if (st.node_id === nodeId && !TERMINAL_STATUSES.has(st.status)) live.set(sid, { status: "REGISTERED", attempt: st.attempt, node_id: null });
      },
    },
    opts.liveness,
  );

  const sweepCtx = { infra, store, log, graceMs: opts.resultGraceMs ?? 120_000, live, stats };
  await recover(tasks, sweepCtx, onTaskDone);
  let sweeping = false;
  const sweepTimer = setInterval(() => {
    if (sweeping) return; // one sweep at a time, however slow
    sweeping = true;
    void sweep(sweepCtx)
      .catch((err) => log.warn({ err: errorMessage(err) }, "sweep failed"))
      .finally(() => (sweeping = false));
  }, Math.min(MAX_TIMER_MS, opts.sweepIntervalMs ?? 5_000));
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
    { httpUrl, tasks, inference, stats, prometheus: () => metrics.registry.metrics() },
    [
      () => server && closeServer(server),
      () => clearInterval(sweepTimer),
      () => monitor.stop(),
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
