/**
 * Sessions that no gateway could finish: when a dispatch message runs out of
 * deliveries (every attempt's gateway died or lost NATS), JetStream sends a
 * MAX_DELIVERIES advisory. The supervisor then records an ERROR result for
 * the session through the normal results path and removes the message, so
 * the task ends now instead of at its budget.
 */
import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import type { Logger } from "pino";
import { publishDurable, readDurable } from "../../nats/messages.ts";
import type { Infra } from "../../nats/infra.ts";
import { validate } from "../../protocol/codec.ts";
import { errorMessage } from "../../protocol/errors.ts";
import { emptyTiming, SessionDispatch, type SessionResult } from "../../protocol/schemas.ts";
import { STREAMS, SUBJECTS } from "../../protocol/subjects.ts";

export const MAX_DELIVERIES_ADVISORY = `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.${STREAMS.sessions}.*`;

interface Advisory {
  stream: string;
  consumer: string;
  stream_seq: number;
  deliveries: number;
}

export function followDeadLetters(nc: NatsConnection, infra: Infra, log: Logger): Subscription {
  return nc.subscribe(MAX_DELIVERIES_ADVISORY, {
    callback: (err, msg) => {
      if (err) return log.error({ err }, "advisory subscription failed");
      let adv: Advisory;
      try {
        adv = msg.json<Advisory>();
      } catch (e) {
        return log.warn({ err: errorMessage(e) }, "malformed max-deliveries advisory");
      }
      void giveUp(infra, adv, log).catch((e) => log.error({ err: errorMessage(e), seq: adv.stream_seq }, "could not record a dead session"));
    },
  });
}

async function giveUp(infra: Infra, adv: Advisory, log: Logger): Promise<void> {
  const m = await infra.jsm.streams.getMessage(STREAMS.sessions, { seq: adv.stream_seq }).catch(() => null);
  if (!m) return; // already acked or removed
  const d = validate(SessionDispatch, await readDurable(infra, m.data, m.header), "session dispatch");
  const error = `no gateway finished the session after ${adv.deliveries} attempts`;
  const result: SessionResult = {
    session_id: d.session_id,
    task_id: d.task_id,
    status: "ERROR",
    trajectory: { status: "ERROR", metadata: {}, traces: [], error },
    timing: emptyTiming(),
    node_id: null,
    error,
    metadata: d.metadata,
    attempt: adv.deliveries,
  };
  log.warn({ session_id: d.session_id, task_id: d.task_id, deliveries: adv.deliveries }, "giving up on a session");
  await publishDurable(infra, SUBJECTS.supervisorResult(d.task_id), result, `${d.session_id}:dead`);
  await infra.jsm.streams.deleteMessage(STREAMS.sessions, adv.stream_seq).catch(() => false);
}
