/**
 * Progress of a datagen run: on a TTY a bar redrawn in place with the ETA;
 * elsewhere a line every interval. The ETA extrapolates this run's pace
 * (instances finished before a restart do not count toward it).
 */
import type { DatagenState } from "./state.ts";

export class Progress {
  readonly #t0 = Date.now();
  #doneNow = 0;
  #timer?: NodeJS.Timeout;
  readonly #tty: boolean;

  constructor(
    private readonly out: NodeJS.WritableStream,
    private readonly total: number,
    private readonly state: DatagenState,
    private readonly intervalMs: number,
  ) {
    this.#tty = (out as NodeJS.WriteStream).isTTY === true;
  }

  start(): void {
    this.#draw();
    this.#timer = setInterval(() => this.#draw(), this.#tty ? 1000 : this.intervalMs);
    this.#timer.unref();
  }

  finished(): void {
    this.#doneNow++;
    if (this.#tty) this.#draw();
  }

  note(msg: string): void {
    this.out.write(this.#tty ? `\r\x1b[K${msg}\n` : `${msg}\n`);
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#draw();
    if (this.#tty) this.out.write("\n");
  }

  line(): string {
    const done = Object.values(this.state.done);
    const n = done.length;
    const sessions = done.reduce((a, d) => a + d.sessions, 0);
    const accepted = done.reduce((a, d) => a + d.accepted, 0);
    const elapsed = Date.now() - this.#t0;
    const left = this.total - n;
    const eta = this.#doneNow ? fmt((elapsed / this.#doneNow) * left) : "?";
    const rate = sessions ? ((accepted / sessions) * 100).toFixed(1) : "0.0";
    return `${n}/${this.total} instances · ${sessions} sessions · ${accepted} accepted (${rate}%) · ${Object.keys(this.state.submitted).length} in flight · elapsed ${fmt(elapsed)} · ETA ${left ? eta : "0s"}`;
  }

  #draw(): void {
    const n = Object.keys(this.state.done).length;
    if (!this.#tty) return void this.out.write(`datagen: ${this.line()}\n`);
    const width = 30;
    const fill = this.total ? Math.round((n / this.total) * width) : width;
    this.out.write(`\r\x1b[K[${"#".repeat(fill)}${"-".repeat(width - fill)}] ${this.line()}`);
  }
}

function fmt(ms: number): string {
  const s = Math.round(ms / 1000);
  return s >= 3600 ? `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m` : s >= 60 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s` : `${s}s`;
}
