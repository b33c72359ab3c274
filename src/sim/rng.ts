/**
 * Seeded, stateless randomness: every draw is a hash of its key parts, so the
 * same request with the same seeds gives the same output in any order and on
 * any server instance.
 */
import { createHash } from "node:crypto";

/** A uniform number in [0, 1) determined by the key parts. */
export function uniform(...parts: unknown[]): number {
  const h = createHash("sha256").update(JSON.stringify(parts)).digest();
  // 48 bits are plenty and stay exact in a double.
  return h.readUIntBE(0, 6) / 2 ** 48;
}

/** A small fast PRNG (mulberry32) seeded from key parts, for long random sequences. */
export function prng(...parts: unknown[]): () => number {
  let a = createHash("sha256").update(JSON.stringify(parts)).digest().readUInt32BE(0);
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Picks an index by weights given a uniform draw u; returns the index and its probability. */
export function pickWeighted(weights: readonly number[], u: number): { index: number; p: number } {
  const total = weights.reduce((a, b) => a + b, 0);
  let acc = 0;
  for (let i = 0; i < weights.length; i++) {
    acc += weights[i] / total;
    if (u < acc) return { index: i, p: weights[i] / total };
  }
  const last = weights.length - 1;
  return { index: last, p: weights[last] / total };
}
