/**
 * The inference gate: every upstream call of a proxy passes through it. While
 * open, calls go straight through and are counted in flight. While paused,
 * new calls wait at the gate (the client sees a slow answer, never an error)
 * and `pause()` resolves once the calls already in flight have finished, or
 * its timeout passes. `resume(version)` records the new policy version and
 * releases the held calls, which then go upstream under that version.
 *
 * Each call learns the policy version in force when it went upstream and how
 * long it was held. Held calls are bounded by the proxy's concurrent requests
 * (one per harness call), so the wait list needs no separate limit.
 */

export interface GateTicket {
  /** The policy version in force when the call was let through. */
  readonly policyVersion: number;
  /** Milliseconds the call waited at the gate (0 when it was open). */
  readonly heldMs: number;
  /** Marks the upstream call finished; idempotent. */
  leave(): void;
}

export interface DrainReport {
  /** Calls in flight when the gate closed that have finished since (the whole pause, whichever call closed it). */
  drained: number;
  /** Calls waiting at the gate when it resolved. */
  held: number;
  /** Calls still in flight (non-zero only when the timeout passed first). */
  inflight: number;
  timedOut: boolean;
  ms: number;
}

export interface ReleaseReport {
  released: number;
  policyVersion: number;
  /** How long the gate was paused, or null when it was open. */
  pausedMs: number | null;
}

export interface GateOptions {
  paused?: boolean;
  policyVersion?: number;
  /** Milliseconds clock (injected in tests). */
  now?: () => number;
}

interface Waiter {
  since: number;
  resolve: (t: GateTicket) => void;
  reject: (err: unknown) => void;
  signal?: AbortSignal;
  onAbort?: () => void;
}

export class InferenceGate {
  #paused: boolean;
  #version: number;
  #pausedAt: number | null;
  #inflight = 0;
  /** Calls finished since the gate closed. */
  #drained = 0;
  readonly #held = new Set<Waiter>();
  readonly #idle = new Set<() => void>();
  readonly #now: () => number;

  constructor(opts: GateOptions = {}) {
    this.#now = opts.now ?? (() => performance.now());
    this.#paused = opts.paused ?? false;
    this.#version = opts.policyVersion ?? 0;
    this.#pausedAt = this.#paused ? this.#now() : null;
  }

  get paused(): boolean {
    return this.#paused;
  }

  get policyVersion(): number {
    return this.#version;
  }

  get inflight(): number {
    return this.#inflight;
  }

  get held(): number {
    return this.#held.size;
  }

  /**
   * Resolves when the call may go upstream: at once while open, on resume
   * while paused. Rejects with the signal's reason if it aborts while held.
   */
  enter(signal?: AbortSignal): Promise<GateTicket> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (!this.#paused) return Promise.resolve(this.#admit(0));
    return new Promise<GateTicket>((resolve, reject) => {
      const w: Waiter = { since: this.#now(), resolve, reject, signal };
      if (signal) {
        w.onAbort = () => {
          this.#held.delete(w);
          reject(signal.reason);
        };
        signal.addEventListener("abort", w.onAbort, { once: true });
      }
      this.#held.add(w);
    });
  }

  /**
   * Closes the gate and waits until the calls in flight have finished or
   * `timeoutMs` passed. Pausing a paused gate is allowed (several callers may
   * wait at once): it waits the same way and reports the same pause.
   */
  async pause(timeoutMs: number): Promise<DrainReport> {
    const t0 = this.#now();
    if (!this.#paused) {
      this.#paused = true;
      this.#pausedAt = t0;
      this.#drained = 0;
    }
    let timedOut = false;
    if (this.#inflight > 0) {
      timedOut = await new Promise<boolean>((resolve) => {
        const done = (v: boolean) => {
          clearTimeout(timer);
          this.#idle.delete(onIdle);
          resolve(v);
        };
        const onIdle = () => done(false);
        const timer = setTimeout(() => done(true), timeoutMs);
        timer.unref?.();
        this.#idle.add(onIdle);
      });
    }
    return { drained: this.#drained, held: this.#held.size, inflight: this.#inflight, timedOut, ms: this.#now() - t0 };
  }

  /** Opens the gate under `policyVersion` (never lowered) and releases every held call. */
  resume(policyVersion: number): ReleaseReport {
    this.#version = Math.max(this.#version, policyVersion);
    const pausedMs = this.#pausedAt === null ? null : this.#now() - this.#pausedAt;
    this.#paused = false;
    this.#pausedAt = null;
    const waiters = [...this.#held];
    this.#held.clear();
    const now = this.#now();
    for (const w of waiters) {
      if (w.signal && w.onAbort) w.signal.removeEventListener("abort", w.onAbort);
      w.resolve(this.#admit(now - w.since));
    }
    return { released: waiters.length, policyVersion: this.#version, pausedMs };
  }

  #admit(heldMs: number): GateTicket {
    this.#inflight++;
    let left = false;
    return {
      policyVersion: this.#version,
      heldMs,
      leave: () => {
        if (left) return;
        left = true;
        this.#inflight--;
        if (this.#paused) this.#drained++;
        if (this.#inflight === 0) for (const f of [...this.#idle]) f();
      },
    };
  }
}
