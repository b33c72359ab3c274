/**
 * Whether a session's dispatch message is still in the POLAR_SESSIONS work
 * queue (a gateway acks it, removing it, only once the session's result is
 * durably published). nats.js answers a message that is not there with null;
 * when the answer is unknown (NATS unavailable) the message counts as queued.
 */
import type { JetStreamManager } from "@nats-io/jetstream";
import { STREAMS } from "../protocol/subjects.ts";

export async function dispatchQueued(jsm: JetStreamManager, seq: number): Promise<boolean> {
  try {
    return (await jsm.streams.getMessage(STREAMS.sessions, { seq })) !== null;
  } catch {
    return true; // unknown: callers keep waiting, or release as before
  }
}
