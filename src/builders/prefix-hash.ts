/**
 * Prefix hashes of token sequences: `h[i]` is a 32-bit hash of `ids[0..i)`, so
 * "is T a prefix of P" costs one comparison (`hp[T.length] === ht[T.length]`)
 * plus, on a hit, one exact comparison to rule out a collision. Computing
 * them is linear in the sequence length.
 */
export function prefixHashes(ids: readonly number[]): Uint32Array {
  const h = new Uint32Array(ids.length + 1);
  let x = 0x811c9dc5;
  for (let i = 0; i < ids.length; i++) {
    x = Math.imul(x ^ ids[i], 0x01000193);
    x ^= x >>> 15;
    h[i + 1] = x;
  }
  return h;
}

/** True when `prefix` equals `ids[0..prefix.length)` (exact). */
export function isPrefix(prefix: readonly number[], ids: readonly number[]): boolean {
  if (prefix.length > ids.length) return false;
  for (let i = 0; i < prefix.length; i++) if (prefix[i] !== ids[i]) return false;
  return true;
}

/**
 * Length of the longest common prefix of two sequences, by binary search on
 * their prefix hashes (for diagnostics: the last token is checked, and only a
 * detected collision falls back to a linear walk).
 */
export function commonPrefix(a: readonly number[], ha: Uint32Array, b: readonly number[], hb: Uint32Array): number {
  let lo = 0;
  let hi = Math.min(a.length, b.length);
  while (lo < hi) {
    const mid = (lo + hi + 1) >>> 1;
    if (ha[mid] === hb[mid]) lo = mid;
    else hi = mid - 1;
  }
  if (lo === 0 || a[lo - 1] === b[lo - 1]) return lo;
  let n = 0;
  while (n < lo && a[n] === b[n]) n++;
  return n;
}

/** Exact equality of `a[aStart..aStart+len)` and `b[bStart..bStart+len)`. */
export function sliceEquals(a: readonly number[], aStart: number, b: readonly number[], bStart: number, len: number): boolean {
  if (aStart + len > a.length || bStart + len > b.length) return false;
  for (let i = 0; i < len; i++) if (a[aStart + i] !== b[bStart + i]) return false;
  return true;
}
