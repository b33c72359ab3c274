/**
 * Progress of a long run for a person: on a terminal one line redrawn in
 * place (bar, counts per status, elapsed, ETA); elsewhere a plain line
 * whenever the counts change, at most every `intervalMs`, and always the last.
 */
export interface ProgressOptions {
  total: number;
  label?: string;
  out?: NodeJS.WriteStream | NodeJS.WritableStream;
  /** Default: whether `out` is a TTY. */
  tty?: boolean;
  /** Non-TTY: the least time between two lines. */
  intervalMs?: number;
  now?: () => number;
}

const WIDTH = 28;

export class Progress {
  readonly #o: Required<Omit<ProgressOptions, "out">> & { out: NodeJS.WritableStream };
  readonly #t0: number;
  readonly #counts = new Map<string, number>();
  #done = 0;
  #lastLine = -Infinity;
  #pending = false;

  constructor(opts: ProgressOptions) {
    const out = opts.out ?? process.stderr;
    this.#o = {
      total: opts.total,
      label: opts.label ?? "sessions",
      out,
      tty: opts.tty ?? (out as NodeJS.WriteStream).isTTY === true,
      intervalMs: opts.intervalMs ?? 2000,
      now: opts.now ?? Date.now,
    };
    this.#t0 = this.#o.now();
  }

  /** One item finished with `status`. */
  tick(status: string): void {
    this.#done++;
    this.#counts.set(status, (this.#counts.get(status) ?? 0) + 1);
    this.#draw(this.#done === this.#o.total);
  }

  /** Ends the display (a final newline on a terminal, the last plain line elsewhere). */
  finish(): void {
    if (this.#o.tty) this.#o.out.write("\n");
    else if (this.#pending) this.#emit();
  }

  /** The text of the current state (no bar): counts, elapsed, ETA. */
  line(): string {
    const elapsed = (this.#o.now() - this.#t0) / 1000;
    const tally = [...this.#counts].map(([k, v]) => `${k} ${v}`).join(" · ") || "waiting";
    const eta = this.#done > 0 && this.#done < this.#o.total ? ` · ETA ${fmtSeconds((elapsed / this.#done) * (this.#o.total - this.#done))}` : "";
    return `${this.#done}/${this.#o.total} ${this.#o.label} · ${tally} · ${fmtSeconds(elapsed)}${eta}`;
  }

  #draw(force: boolean): void {
    if (this.#o.tty) {
      const filled = Math.round((WIDTH * this.#done) / Math.max(1, this.#o.total));
      this.#o.out.write(`\r\x1b[2K[${"█".repeat(filled)}${"░".repeat(WIDTH - filled)}] ${this.line()}`);
      return;
    }
    this.#pending = true;
    if (force || this.#o.now() - this.#lastLine >= this.#o.intervalMs) this.#emit();
  }

  #emit(): void {
    this.#lastLine = this.#o.now();
    this.#pending = false;
    this.#o.out.write(`${this.line()}\n`);
  }
}

export function fmtSeconds(s: number): string {
  if (s < 60) return `${s.toFixed(1)}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(Math.round(s % 60)).padStart(2, "0")}s`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, "0")}m`;
}
