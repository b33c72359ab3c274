/**
 * How long the upstream was busy: the time during which at least one call
 * was in flight. A reader takes two totals and divides their difference by
 * the interval to get the busy fraction of that interval.
 */
export class BusyClock {
  #inflight = 0;
  #busyMs = 0;
  #since = 0;

  constructor(private readonly now: () => number = () => performance.now()) {}

  begin(): void {
    if (this.#inflight++ === 0) this.#since = this.now();
  }

  end(): void {
    if (this.#inflight === 0) return;
    if (--this.#inflight === 0) this.#busyMs += this.now() - this.#since;
  }

  get inflight(): number {
    return this.#inflight;
  }

  /** Busy milliseconds so far, including the current busy stretch. */
  totalMs(): number {
    return this.#busyMs + (this.#inflight ? this.now() - this.#since : 0);
  }
}
