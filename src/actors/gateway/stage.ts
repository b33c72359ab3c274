/**
 * A stage of the gateway pipeline as a mailbox: `workers` sessions are worked
 * on at once and at most `queue` more wait for a worker, in arrival order.
 * The depth is the real number waiting. When the stage is full, `enter`
 * either waits for room (the caller keeps whatever it holds upstream: that
 * is backpressure) or refuses with an `unavailable` error, as configured.
 * The pull gate (`Stage.room`) admits a new session only when every stage it
 * will pass through has room.
 */
import { PolarError } from "../../protocol/errors.ts";
import { abortError } from "../../util/abort.ts";

export type WhenFull = "wait" | "refuse";

export interface StageOptions {
  name: string;
  /** Sessions worked on at once (at least 1). */
  workers: number;
  /** Sessions that may wait for a worker (0: none, entering needs a free worker). */
  queue: number;
  whenFull: WhenFull;
}

interface Waiter {
  grant(release: () => void): void;
}

export class Stage {
  readonly name: string;
  readonly #o: StageOptions;
  #active = 0;
  readonly #queued: Waiter[] = [];
  /** Callers waiting for room to enter the queue (whenFull: wait). */
  #blocked = 0;
  #changed: Array<() => void> = [];

  constructor(o: StageOptions) {
    if (!(o.workers >= 1) || !(o.queue >= 0)) throw new TypeError(`stage ${o.name}: workers must be >= 1 and queue >= 0`);
    this.name = o.name;
    this.#o = o;
  }

  get capacity(): number {
    return this.#o.workers + this.#o.queue;
  }

  /** Sessions being worked on. */
  get inflight(): number {
    return this.#active;
  }

  /** Sessions queued for a worker (at most `queue`). */
  get depth(): number {
    return this.#queued.length;
  }

  /** Callers waiting for room to queue (they still hold their place upstream). */
  get blocked(): number {
    return this.#blocked;
  }

  /** Room for one more session (nobody is already waiting for room). */
  get hasRoom(): boolean {
    return !this.#full() && this.#blocked === 0;
  }

  #full(): boolean {
    return this.#active + this.#queued.length >= this.capacity;
  }

  /**
   * Enters the stage: resolves with `release` once a worker is this caller's.
   * `onAdmitted` is called as soon as the caller has its place (queued or
   * working): the moment to let go of the previous stage. Rejects with the
   * signal's reason if it aborts while waiting (no place is then held), or
   * with `unavailable` when full and `whenFull` is refuse.
   */
  async enter(signal?: AbortSignal, onAdmitted?: () => void): Promise<() => void> {
    if (signal?.aborted) throw abortError(signal);
    if (this.#full()) {
      if (this.#o.whenFull === "refuse") throw new PolarError("unavailable", `stage ${this.name} is full (${this.capacity})`);
      this.#blocked++;
      try {
        while (this.#full()) await this.changed(signal);
      } finally {
        this.#blocked--;
      }
    }
    if (this.#active < this.#o.workers && this.#queued.length === 0) {
      this.#active++;
      this.#notify();
      onAdmitted?.();
      return this.#releaser();
    }
    return new Promise<() => void>((resolve, reject) => {
      const onAbort = () => {
        const i = this.#queued.indexOf(waiter);
        if (i >= 0) this.#queued.splice(i, 1);
        this.#notify();
        reject(abortError(signal!));
      };
      const waiter: Waiter = {
        grant: (release) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(release);
        },
      };
      this.#queued.push(waiter);
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#notify();
      onAdmitted?.();
    });
  }

  /** Runs `fn` inside the stage (entering it first); the worker is released however `fn` ends. */
  async run<T>(fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    const release = await this.enter(signal);
    try {
      return await fn();
    } finally {
      release();
    }
  }

  #releaser(): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const next = this.#queued.shift();
      if (next) next.grant(this.#releaser());
      else this.#active--;
      this.#notify();
    };
  }

  /** Resolves at the next change of this stage's occupancy (or rejects when the signal aborts). */
  changed(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(abortError(signal));
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        this.#changed = this.#changed.filter((w) => w !== wake);
        reject(abortError(signal!));
      };
      const wake = () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      };
      this.#changed.push(wake);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  #notify(): void {
    const w = this.#changed;
    this.#changed = [];
    for (const f of w) f();
  }

  /** Resolves once every stage has room; rejects when the signal aborts. */
  static async room(stages: Stage[], signal: AbortSignal): Promise<void> {
    for (;;) {
      const full = stages.find((s) => !s.hasRoom);
      if (!full) return;
      await full.changed(signal);
    }
  }
}
