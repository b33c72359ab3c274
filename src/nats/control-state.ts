/**
 * The inference control state in `polar_control` (key `inference`): paused or
 * not and the current policy version. The supervisor writes it with
 * compare-and-set; every gateway reads it when it joins and watches it, so a
 * gateway that joins while paused starts paused.
 */
import type { KV } from "@nats-io/kv";
import { decode, encode, validate } from "../protocol/codec.ts";
import { PolarError } from "../protocol/errors.ts";
import { ControlState } from "../protocol/schemas.ts";
import { CONTROL_KEY } from "../protocol/subjects.ts";

export const INITIAL_CONTROL: ControlState = { paused: false, policy_version: 0, paused_at: null, updated_at: new Date(0).toISOString() };

export async function readControl(kv: KV): Promise<{ state: ControlState; revision: number }> {
  const e = await kv.get(CONTROL_KEY);
  if (!e || !e.value?.length || e.operation !== "PUT") return { state: INITIAL_CONTROL, revision: 0 };
  return { state: validate(ControlState, decode(e.value), "control state"), revision: e.revision };
}

/**
 * Applies `change` to the current state with compare-and-set, retrying on a
 * concurrent write. `change` may throw (a refused command) and returns the
 * new state, or null to leave it unchanged. Resolves with the state before
 * and after.
 */
export async function updateControl(
  kv: KV,
  change: (s: ControlState) => ControlState | null,
): Promise<{ before: ControlState; after: ControlState }> {
  for (let i = 0; i < 20; i++) {
    const { state, revision } = await readControl(kv);
    const next = change(state);
    if (!next) return { before: state, after: state };
    try {
      if (revision === 0) await kv.create(CONTROL_KEY, encode(next));
      else await kv.update(CONTROL_KEY, encode(next), revision);
      return { before: state, after: next };
    } catch {
      // Another writer moved the revision: read again and re-apply.
    }
  }
  throw new PolarError("conflict", "inference control state: too many concurrent updates");
}

/** Calls `onState` for every change of the state until the signal aborts (the current value first). */
export async function watchControl(kv: KV, onState: (s: ControlState) => void, signal: AbortSignal): Promise<void> {
  const it = await kv.watch({ key: CONTROL_KEY });
  const stop = () => it.stop();
  signal.addEventListener("abort", stop, { once: true });
  try {
    for await (const e of it) {
      if (e.operation !== "PUT" || !e.value?.length) continue;
      onState(validate(ControlState, decode(e.value), "control state"));
    }
  } finally {
    signal.removeEventListener("abort", stop);
  }
}
