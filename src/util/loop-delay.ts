/**
 * How late this process's event loop runs its callbacks: the p99 and the
 * maximum of the delay over the last window (perf_hooks histogram, reset each
 * window). A gateway whose loop runs late answers its proxy calls, pings and
 * heartbeats late by as much, so it is reported with the node's metrics.
 */
import { monitorEventLoopDelay, type IntervalHistogram } from "node:perf_hooks";

export interface LoopDelay {
  p99_ms: number;
  max_ms: number;
}

export class LoopDelayMonitor {
  readonly #h: IntervalHistogram;
  readonly #timer: NodeJS.Timeout;
  #last: LoopDelay = { p99_ms: 0, max_ms: 0 };

  constructor(windowMs = 5000) {
    this.#h = monitorEventLoopDelay({ resolution: 10 });
    this.#h.enable();
    this.#timer = setInterval(() => this.#roll(), windowMs);
    this.#timer.unref();
  }

  /** The last full window's figures (zeros before the first window ends). */
  get last(): LoopDelay {
    return this.#last;
  }

  #roll(): void {
    const ms = (ns: number) => Math.round(ns / 1e4) / 100;
    this.#last = this.#h.count > 0 ? { p99_ms: ms(this.#h.percentile(99)), max_ms: ms(this.#h.max) } : { p99_ms: 0, max_ms: 0 };
    this.#h.reset();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#h.disable();
  }
}
