/**
 * The load model: a fixed number of generation slots with a FIFO queue, a
 * pause gate, and the counters behind /metrics. A request holds a slot from
 * its first prefill moment to its last token. Busy time is integrated exactly
 * (slot-milliseconds), and windowed figures come from periodic snapshots of
 * the cumulative counters, so memory stays bounded under any load.
 */
import { HttpError } from "./http.ts";

export interface SimMetrics {
  slots: number;
  running: number;
  waiting: number;
  paused: boolean;
  /** Busy slot fraction over the last metrics window (or since start when younger). */
  busyFraction: number;
  /** Generated tokens per second over the same window. */
  tokensPerSecond: number;
  windowSeconds: number;
  busySlotSecondsTotal: number;
  requestsTotal: number;
  requestsRejected: number;
  promptTokensTotal: number;
  generationTokensTotal: number;
  maxRunning: number;
  uptimeSeconds: number;
  policyVersion: string;
}

interface Snapshot {
  at: number;
  busyMs: number;
  tokens: number;
}

export interface Lease {
  release(): void;
}

export class Scheduler {
  readonly #slots: number;
  readonly #maxQueue: number;
  readonly #windowMs: number;
  readonly #now: () => number;
  readonly #started: number;
  readonly #queue: Array<() => void> = [];
  readonly #pauseWaiters = new Set<() => void>();
  readonly #snapshots: Snapshot[] = [];
  readonly #timer: NodeJS.Timeout;
  #running = 0;
  #paused = false;
  #busyMs = 0;
  #lastChange: number;
  #maxRunning = 0;
  #tokens = 0;
  #promptTokens = 0;
  #requests = 0;
  #rejected = 0;
  #pausedWaiting = 0;

  constructor(opts: { slots: number; maxQueue: number; windowMs: number; now?: () => number }) {
    this.#slots = opts.slots;
    this.#maxQueue = opts.maxQueue;
    this.#windowMs = opts.windowMs;
    this.#now = opts.now ?? (() => performance.now());
    this.#started = this.#lastChange = this.#now();
    const every = Math.max(50, Math.floor(opts.windowMs / 40));
    this.#timer = setInterval(() => this.#snapshot(), every);
    this.#timer.unref();
    this.#snapshot();
  }

  /** Waits for the pause gate and a free slot; rejects with the signal's reason or 503 when the queue is full. */
  async acquire(signal: AbortSignal): Promise<Lease> {
    signal.throwIfAborted();
    this.#requests++;
    if (this.#paused) await this.#waitResume(signal);
    if (this.#running >= this.#slots) {
      if (this.#queue.length >= this.#maxQueue) {
        this.#rejected++;
        throw new HttpError(503, "the server queue is full", "ServiceUnavailableError");
      }
      await this.#waitSlot(signal);
    } else {
      this.#change(+1);
    }
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.#releaseSlot();
      },
    };
  }

  /** Requests holding a slot now. */
  get running(): number {
    return this.#running;
  }

  countPrompt(n: number): void {
    this.#promptTokens += n;
  }

  countTokens(n: number): void {
    this.#tokens += n;
  }

  pause(): void {
    this.#paused = true;
  }

  resume(): void {
    this.#paused = false;
    for (const wake of [...this.#pauseWaiters]) wake();
  }

  metrics(policyVersion: string): SimMetrics {
    const now = this.#now();
    const busy = this.#busyAt(now);
    const base = this.#windowBase(now);
    const span = Math.max(now - base.at, 1);
    return {
      slots: this.#slots,
      running: this.#running,
      waiting: this.#queue.length + this.#pausedWaiting,
      paused: this.#paused,
      busyFraction: (busy - base.busyMs) / (span * this.#slots),
      tokensPerSecond: ((this.#tokens - base.tokens) * 1000) / span,
      windowSeconds: span / 1000,
      busySlotSecondsTotal: busy / 1000,
      requestsTotal: this.#requests,
      requestsRejected: this.#rejected,
      promptTokensTotal: this.#promptTokens,
      generationTokensTotal: this.#tokens,
      maxRunning: this.#maxRunning,
      uptimeSeconds: (now - this.#started) / 1000,
      policyVersion,
    };
  }

  close(): void {
    clearInterval(this.#timer);
  }

  #waitResume(signal: AbortSignal): Promise<void> {
    this.#pausedWaiting++;
    return new Promise<void>((resolve, reject) => {
      const done = () => {
        this.#pauseWaiters.delete(wake);
        this.#pausedWaiting--;
        signal.removeEventListener("abort", onAbort);
      };
      const wake = () => {
        done();
        resolve();
      };
      const onAbort = () => {
        done();
        reject(signal.reason);
      };
      this.#pauseWaiters.add(wake);
      signal.addEventListener("abort", onAbort, { once: true });
    });
  }

  #waitSlot(signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      // The releasing request hands its slot over directly: `running` stays constant.
      const grant = () => {
        signal.removeEventListener("abort", onAbort);
        resolve();
      };
      const onAbort = () => {
        const i = this.#queue.indexOf(grant);
        if (i >= 0) this.#queue.splice(i, 1);
        reject(signal.reason);
      };
      this.#queue.push(grant);
      signal.addEventListener("abort", onAbort, { once: true });
    });
  }

  #releaseSlot(): void {
    const next = this.#queue.shift();
    if (next) next();
    else this.#change(-1);
  }

  #change(delta: number): void {
    const now = this.#now();
    this.#busyMs = this.#busyAt(now);
    this.#lastChange = now;
    this.#running += delta;
    this.#maxRunning = Math.max(this.#maxRunning, this.#running);
  }

  #busyAt(now: number): number {
    return this.#busyMs + this.#running * (now - this.#lastChange);
  }

  #snapshot(): void {
    const at = this.#now();
    this.#snapshots.push({ at, busyMs: this.#busyAt(at), tokens: this.#tokens });
    while (this.#snapshots.length > 2 && this.#snapshots[1].at <= at - this.#windowMs) this.#snapshots.shift();
  }

  /** The oldest snapshot still inside the window (the window start). */
  #windowBase(now: number): Snapshot {
    const first = this.#snapshots.find((s) => s.at >= now - this.#windowMs);
    return first ?? this.#snapshots[this.#snapshots.length - 1] ?? { at: this.#started, busyMs: 0, tokens: 0 };
  }
}
