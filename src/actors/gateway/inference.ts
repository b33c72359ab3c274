/**
 * The gateway's side of weight sync. The supervisor's commands arrive on
 * `polar.node.inference.<node_id>` (request/reply); the `polar_control` KV
 * state is also watched, so a gateway that joins while paused starts paused
 * and one that missed a command catches up. Pause closes the proxy's gate and
 * waits for the in-flight upstream calls (then pauses the engines, when
 * forwarding is configured); resume resumes the engines, then opens the gate
 * under the new policy version.
 */
import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import type { KV } from "@nats-io/kv";
import type { Logger } from "pino";
import { validate } from "../../protocol/codec.ts";
import { NodeInferenceCommand, type ControlState, type NodeInferenceReply } from "../../protocol/schemas.ts";
import { SUBJECTS } from "../../protocol/subjects.ts";
import { serveRequests } from "../../nats/messages.ts";
import { watchControl } from "../../nats/control-state.ts";
import type { InferenceGate } from "../../proxy/gate.ts";
import { forwardEngines, type EnginePauseKind } from "./engine-pause.ts";

/** Drain bound when a pause is learnt from the KV state rather than a command. */
const WATCH_DRAIN_MS = 60_000;

export interface InferenceControlDeps {
  nc: NatsConnection;
  control: KV;
  gate: InferenceGate;
  nodeId: string;
  log: Logger;
  upstreams: readonly string[];
  enginePause: EnginePauseKind;
}

export interface InferenceControl {
  stop(): Promise<void>;
}

export function startInferenceControl(d: InferenceControlDeps): InferenceControl {
  const log = d.log.child({ part: "inference" });
  // A command and the KV watch may both apply the same change (whichever
  // comes first acts); both answers then describe that one change.
  let enginesPaused = false;
  let lastRelease = { version: d.gate.policyVersion, released: 0, held: 0, engines: [] as NodeInferenceReply["engines"] };

  const pause = async (timeoutMs: number): Promise<NodeInferenceReply> => {
    const first = !d.gate.paused;
    const r = await d.gate.pause(timeoutMs);
    let engines: NodeInferenceReply["engines"] = [];
    if (d.gate.paused && !enginesPaused) {
      enginesPaused = true;
      engines = await forwardEngines(d.enginePause, d.upstreams, "pause");
    }
    if (first) log.info({ drained: r.drained, held: r.held, inflight: r.inflight, timed_out: r.timedOut, ms: Math.round(r.ms) }, "inference paused");
    return reply({ paused: d.gate.paused, drained: r.drained, held: r.held, inflight: r.inflight, drain_timed_out: r.timedOut, drain_ms: r.ms, engines });
  };

  let engineResume: Promise<NodeInferenceReply["engines"]> | null = null;
  const resume = async (version: number): Promise<NodeInferenceReply> => {
    if (enginesPaused) {
      enginesPaused = false;
      engineResume = forwardEngines(d.enginePause, d.upstreams, "resume");
    }
    const engines = engineResume ? await engineResume : [];
    // Whoever gets here first opens the gate; a later caller for the same version repeats that answer.
    if (!d.gate.paused && version <= d.gate.policyVersion) {
      const same = lastRelease.version === d.gate.policyVersion;
      return reply({ paused: false, held: same ? lastRelease.held : 0, released: same ? lastRelease.released : 0, engines: same ? lastRelease.engines : [] });
    }
    engineResume = null;
    const held = d.gate.held;
    const wasPaused = d.gate.paused;
    const r = d.gate.resume(version);
    lastRelease = { version: r.policyVersion, released: r.released, held, engines };
    if (wasPaused) log.info({ released: r.released, policy_version: r.policyVersion, paused_ms: Math.round(r.pausedMs ?? 0) }, "inference resumed");
    return reply({ paused: false, held, released: r.released, engines });
  };

  const reply = (p: Partial<NodeInferenceReply> & { paused: boolean }): NodeInferenceReply => ({
    node_id: d.nodeId,
    ok: true,
    policy_version: d.gate.policyVersion,
    drained: 0,
    held: 0,
    released: 0,
    inflight: 0,
    drain_timed_out: false,
    drain_ms: 0,
    engines: [],
    error: null,
    ...p,
  });

  const sub: Subscription = serveRequests(
    d.nc,
    SUBJECTS.nodeInference(d.nodeId),
    async (body) => {
      const cmd = validate(NodeInferenceCommand, body, "inference command");
      return cmd.op === "pause" ? pause(cmd.timeout_ms) : resume(cmd.policy_version);
    },
    log,
  );

  const onState = (s: ControlState) => {
    if (s.paused && !d.gate.paused) void pause(WATCH_DRAIN_MS).catch((err) => log.warn({ err }, "pause from control state failed"));
    else if (!s.paused && (d.gate.paused || s.policy_version > d.gate.policyVersion)) {
      void resume(s.policy_version).catch((err) => log.warn({ err }, "resume from control state failed"));
    }
  };
  const abort = new AbortController();
  // The watch ends only when the gateway stops or its connection closes; a malformed state is logged and the watch restarted once per second.
  const watching = (async () => {
    while (!abort.signal.aborted && !d.nc.isClosed()) {
      try {
        await watchControl(d.control, onState, abort.signal);
      } catch (err) {
        if (abort.signal.aborted || d.nc.isClosed()) return;
        log.warn({ err }, "control state watch failed; watching again");
      }
      if (!abort.signal.aborted) await new Promise((r) => setTimeout(r, 1000).unref());
    }
  })();

  return {
    async stop() {
      abort.abort();
      await sub.drain().catch(() => {});
      await watching;
    },
  };
}
