/**
 * Prefix hashes of token sequences, kept sparse: `cp[j]` is a 32-bit hash of
 * `ids[0..j*STRIDE)`. The hash of any prefix `ids[0..n)` is then at most
 * STRIDE-1 steps from a checkpoint, so "is T a prefix of P" costs O(STRIDE)
 * (plus, on a hit, one exact comparison to rule out a collision), and the
 * longest common prefix of two sequences O(log n + STRIDE). Computing the
 * checkpoints is one pass over the sequence with n/STRIDE stores.
 */
export const STRIDE = 64;
const SEED = 0x811c9dc5;

const step = (x: number, id: number): number => {
  x = Math.imul(x ^ id, 0x01000193);
  return x ^ (x >>> 15);
};

export function checkpointHashes(ids: readonly number[]): Uint32Array {
  const cp = new Uint32Array(Math.floor(ids.length / STRIDE) + 1);
  let x = SEED;
  cp[0] = x;
  for (let i = 0; i < ids.length; ) {
    x = step(x, ids[i]);
    if (++i % STRIDE === 0) cp[i / STRIDE] = x;
  }
  return cp;
}

/** Hash of `ids[0..n)` (n <= ids.length), from the checkpoints of `ids`. */
export function prefixHash(ids: readonly number[], cp: Uint32Array, n: number): number {
  const j = Math.floor(n / STRIDE);
  let x = cp[j];
  for (let i = j * STRIDE; i < n; i++) x = step(x, ids[i]);
  return x >>> 0;
}

/** True when `prefix` equals `ids[0..prefix.length)` (exact). */
export function isPrefix(prefix: readonly number[], ids: readonly number[]): boolean {
  return prefix.length <= ids.length && sliceEquals(prefix, 0, ids, 0, prefix.length);
}

/**
 * Length of the longest common prefix of two sequences: binary search for the
 * last equal checkpoint, then an exact walk from it (for diagnostics; a hash
 * collision can only make the answer too short by a checkpoint's reach).
 */
export function commonPrefix(a: readonly number[], ca: Uint32Array, b: readonly number[], cb: Uint32Array): number {
  const max = Math.min(a.length, b.length);
  let lo = 0;
  let hi = Math.floor(max / STRIDE);
  while (lo < hi) {
    const mid = (lo + hi + 1) >>> 1;
    if (ca[mid] === cb[mid]) lo = mid;
    else hi = mid - 1;
  }
  let n = lo * STRIDE;
  while (n < max && a[n] === b[n]) n++;
  return n;
}

/** Exact equality of `a[aStart..aStart+len)` and `b[bStart..bStart+len)`. */
export function sliceEquals(a: readonly number[], aStart: number, b: readonly number[], bStart: number, len: number): boolean {
  if (aStart + len > a.length || bStart + len > b.length) return false;
  for (let i = 0; i < len; i++) if (a[aStart + i] !== b[bStart + i]) return false;
  return true;
}
