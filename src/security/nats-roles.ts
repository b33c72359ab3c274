/**
 * NATS roles and what each may publish and subscribe to. Allow-lists: a role
 * gets the subjects its actor uses and nothing else; JetStream API subjects
 * (`$JS.API.>`) are opened only as far as each role needs them, and the
 * destructive ones are denied to everyone but the supervisor.
 *
 * - supervisor: everything (it owns the streams, buckets and task state).
 * - gateway: publishes results, events, heartbeats, eval requests; consumes
 *   dispatches; writes its node entry and leases; never dispatches, never
 *   writes task state, never touches the supervisor's results consumer.
 * - evaluator: consumes eval requests, publishes eval results.
 * - trainer: calls the task API, reads results and traces; publishes no
 *   results and no dispatches.
 * - observer: reads only (task get/status, events, results, traces).
 */
import { STREAMS, BUCKETS, RESULTS_CONSUMER } from "../protocol/subjects.ts";

export const ROLES = ["supervisor", "gateway", "evaluator", "trainer", "observer"] as const;
export type Role = (typeof ROLES)[number];

export interface SubjectPermission {
  allow?: string[];
  deny?: string[];
}

export interface RolePermissions {
  publish: SubjectPermission;
  subscribe: SubjectPermission;
  /** Lets a role answer requests sent to it (reply subjects) without naming them. */
  allow_responses?: boolean;
}

const OBJ_BLOBS = `OBJ_${BUCKETS.blobs}`;

/** JetStream API subjects to read a stream with ephemeral consumers (what the clients' trace/result readers use). */
function readStream(stream: string): string[] {
  return [
    `$JS.API.STREAM.INFO.${stream}`,
    `$JS.API.STREAM.MSG.GET.${stream}`,
    `$JS.API.DIRECT.GET.${stream}`,
    `$JS.API.DIRECT.GET.${stream}.>`,
    `$JS.API.CONSUMER.CREATE.${stream}`,
    `$JS.API.CONSUMER.CREATE.${stream}.>`,
    `$JS.API.CONSUMER.INFO.${stream}.>`,
    `$JS.API.CONSUMER.MSG.NEXT.${stream}.>`,
    `$JS.ACK.${stream}.>`,
  ];
}

/** Never for anyone but the supervisor: removing or rewriting stored data, or acking the supervisor's own consumer. */
const DESTRUCTIVE = [
  "$JS.API.STREAM.DELETE.>",
  "$JS.API.STREAM.PURGE.>",
  "$JS.API.STREAM.UPDATE.>",
  "$JS.API.STREAM.MSG.DELETE.>",
  "$JS.API.STREAM.SNAPSHOT.>",
  "$JS.API.STREAM.RESTORE.>",
  "$JS.API.CONSUMER.DELETE.>",
  `$JS.API.CONSUMER.*.${STREAMS.results}.${RESULTS_CONSUMER}`,
  `$JS.API.CONSUMER.*.${STREAMS.results}.${RESULTS_CONSUMER}.>`,
  `$JS.API.CONSUMER.MSG.NEXT.${STREAMS.results}.${RESULTS_CONSUMER}`,
  `$JS.ACK.${STREAMS.results}.${RESULTS_CONSUMER}.>`,
];

const COMMON_PUB = ["_INBOX.>", "$JS.API.INFO", "$JS.FC.>"];

const READER_PUB = [
  ...COMMON_PUB,
  "$JS.API.STREAM.NAMES",
  ...readStream(STREAMS.results),
  ...readStream(STREAMS.traces),
  ...readStream(OBJ_BLOBS),
];

const READER_SUB = ["_INBOX.>", "polar.event.>", "polar.trace.>", "polar.session.result.>"];

export const ROLE_PERMISSIONS: Record<Role, RolePermissions> = {
  supervisor: { publish: { allow: [">"] }, subscribe: { allow: [">"] }, allow_responses: true },
  gateway: {
    publish: {
      allow: [
        ...COMMON_PUB,
        "polar.session.result.*",
        "polar.event.>",
        "polar.node.>",
        "polar.eval.request.>",
        "$JS.API.>",
        `$JS.ACK.${STREAMS.sessions}.>`,
        `$KV.${BUCKETS.nodes}.>`,
        "$KV.polar_leases.>",
        `$O.${BUCKETS.blobs}.>`,
      ],
      deny: DESTRUCTIVE,
    },
    subscribe: { allow: ["_INBOX.>", "polar.>", "$KV.>", "$O.>"] },
    allow_responses: true,
  },
  evaluator: {
    publish: {
      allow: [
        ...COMMON_PUB,
        "polar.eval.result.>",
        "polar.event.>",
        "$JS.API.STREAM.INFO.*",
        "$JS.API.CONSUMER.INFO.POLAR_EVALS.>",
        "$JS.API.CONSUMER.CREATE.POLAR_EVALS.>",
        "$JS.API.CONSUMER.DURABLE.CREATE.POLAR_EVALS.>",
        "$JS.API.CONSUMER.MSG.NEXT.POLAR_EVALS.>",
        "$JS.ACK.POLAR_EVALS.>",
        // Its registration and heartbeat in polar_nodes; large replies go through the object store.
        `$KV.${BUCKETS.nodes}.>`,
        `$O.${BUCKETS.blobs}.>`,
        ...readStream(OBJ_BLOBS),
      ],
      deny: DESTRUCTIVE,
    },
    // Session cancellations stop the session's evaluation.
    subscribe: { allow: ["_INBOX.>", "polar.eval.>", "polar.session.cancel.*"] },
    allow_responses: true,
  },
  trainer: {
    publish: { allow: [...READER_PUB, "polar.api.task.>", "polar.api.status", "polar.api.inference.>"], deny: DESTRUCTIVE },
    subscribe: { allow: READER_SUB },
  },
  observer: {
    publish: { allow: [...READER_PUB, "polar.api.task.get", "polar.api.status"], deny: DESTRUCTIVE },
    subscribe: { allow: READER_SUB },
  },
};
