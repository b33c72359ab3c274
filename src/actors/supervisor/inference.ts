/**
 * Weight sync, the supervisor's side: `polar.api.inference.pause` and
 * `.resume` (and their HTTP twins). The state is written to `polar_control`
 * first (so gateways that join later, or miss the command, follow it), then
 * the command is sent to every registered gateway and the answer lists what
 * each drained, held and released.
 *
 * - pause `{timeout_seconds?}`: idempotent; pausing a paused cluster answers
 *   `unchanged: true` with what is held now.
 * - resume `{policy_version}`: the version never goes down (a lower one is a
 *   `conflict` naming the current version); an equal one is allowed (resume
 *   without new weights); resuming a running cluster only records the version
 *   (`unchanged: true` when it is the same).
 */
import type { NatsConnection } from "@nats-io/transport-node";
import type { KV } from "@nats-io/kv";
import type { Logger } from "pino";
import { validate } from "../../protocol/codec.ts";
import { errorMessage, PolarError } from "../../protocol/errors.ts";
import {
  PauseRequest,
  ResumeRequest,
  type ControlState,
  type GatewayNodeInfo,
  type InferenceReply,
  type NodeInferenceCommand,
  type NodeInferenceReply,
} from "../../protocol/schemas.ts";
import { SUBJECTS } from "../../protocol/subjects.ts";
import { request } from "../../nats/messages.ts";
import { readControl, updateControl } from "../../nats/control-state.ts";

const DEFAULT_DRAIN_SECONDS = 60;
/** Extra time a node gets to answer beyond its drain timeout. */
const REPLY_SLACK_MS = 5_000;

export interface InferenceDeps {
  nc: NatsConnection;
  control: KV;
  nodes: () => Promise<GatewayNodeInfo[]>;
  log: Logger;
}

export class InferenceService {
  readonly #d: InferenceDeps;

  constructor(d: InferenceDeps) {
    this.#d = d;
  }

  async state(): Promise<ControlState> {
    return (await readControl(this.#d.control)).state;
  }

  async pause(body: unknown): Promise<InferenceReply> {
    const req = validate(PauseRequest, body ?? {}, "pause request");
    const timeoutMs = Math.round((req.timeout_seconds ?? DEFAULT_DRAIN_SECONDS) * 1000);
    const now = new Date().toISOString();
    const { before, after } = await updateControl(this.#d.control, (s) =>
      s.paused ? null : { ...s, paused: true, paused_at: now, updated_at: now },
    );
    const nodes = await this.#fanOut({ op: "pause", timeout_ms: timeoutMs }, timeoutMs + REPLY_SLACK_MS);
    this.#d.log.info({ already: before.paused, nodes: nodes.length, policy_version: after.policy_version }, "inference pause");
    return summarize(after, before.paused, null, nodes);
  }

  async resume(body: unknown): Promise<InferenceReply> {
    const req = validate(ResumeRequest, body, "resume request");
    const now = new Date().toISOString();
    const { before, after } = await updateControl(this.#d.control, (s) => {
      if (req.policy_version < s.policy_version) {
        throw new PolarError(
          "conflict",
          `policy_version ${req.policy_version} is lower than the current version ${s.policy_version}; versions only grow`,
          { details: { policy_version: req.policy_version, current_version: s.policy_version } },
        );
      }
      if (!s.paused && req.policy_version === s.policy_version) return null;
      return { paused: false, policy_version: req.policy_version, paused_at: null, updated_at: now };
    });
    const pausedMs = before.paused && before.paused_at ? Math.max(0, Date.parse(now) - Date.parse(before.paused_at)) : null;
    const nodes = await this.#fanOut({ op: "resume", policy_version: after.policy_version }, REPLY_SLACK_MS * 2);
    this.#d.log.info({ policy_version: after.policy_version, was_paused: before.paused, nodes: nodes.length }, "inference resume");
    const unchanged = !before.paused && before.policy_version === after.policy_version;
    return summarize(after, unchanged, pausedMs, nodes);
  }

  /** Sends the command to every registered gateway at once; a node that fails or does not answer is listed with its error. */
  async #fanOut(cmd: NodeInferenceCommand, timeoutMs: number): Promise<NodeInferenceReply[]> {
    // The node registry may list a node twice while it is being rewritten: one command per node.
    const nodes = [...new Map((await this.#d.nodes()).map((n) => [n.node_id, n])).values()];
    return Promise.all(
      nodes.map(async (n): Promise<NodeInferenceReply> => {
        try {
          return await request<NodeInferenceReply>(this.#d.nc, SUBJECTS.nodeInference(n.node_id), cmd, { timeoutMs });
        } catch (err) {
          return {
            node_id: n.node_id,
            ok: false,
            paused: cmd.op === "pause",
            policy_version: cmd.op === "resume" ? cmd.policy_version : 0,
            drained: 0,
            held: 0,
            released: 0,
            inflight: 0,
            drain_timed_out: false,
            drain_ms: 0,
            engines: [],
            // The node still follows the KV state when it comes back.
            error: errorMessage(err),
          };
        }
      }),
    );
  }
}

function summarize(s: ControlState, unchanged: boolean, pausedMs: number | null, nodes: NodeInferenceReply[]): InferenceReply {
  const sum = (k: "drained" | "held" | "released") => nodes.reduce((a, n) => a + n[k], 0);
  return {
    paused: s.paused,
    policy_version: s.policy_version,
    unchanged,
    paused_at: s.paused_at,
    paused_ms: pausedMs,
    nodes,
    drained: sum("drained"),
    held: sum("held"),
    released: sum("released"),
  };
}
