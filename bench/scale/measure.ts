/**
 * Shared measuring steps of the scale benchmarks: run a batch of sessions on a
 * cluster and read sessions/s and per-process CPU and RSS around it.
 */
import type { Cluster, Proc } from "./cluster.ts";
import { cpuSeconds, median, rssMb } from "./proc.ts";
import { counts, submit, waitAll, type TaskShape } from "./tasks.ts";

let seq = 0;

export interface Batch {
  sessions: number;
  seconds: number;
  perSecond: number;
  /** CPU seconds each process used during the batch, by process name. */
  cpu: Record<string, number>;
  counts: string;
}

/** The processes whose CPU counts as framework cost. */
export function frameworkProcs(c: Cluster): Array<{ name: string; pid: number }> {
  return [...c.gateways.map((g) => ({ name: g.name, pid: g.pid })), { name: "supervisor", pid: c.supervisor.pid }, { name: "nats-server", pid: c.nats.pid }, { name: "sim", pid: c.sim.pid }];
}

/** Submits `tasks` tasks of `shape` at once and waits for all; sessions/s from the submit to the last result. */
export async function runBatch(c: Cluster, label: string, shape: TaskShape, tasks = 1, tick?: (finished: number) => void): Promise<Batch> {
  const procs = frameworkProcs(c).filter((p) => alive(p.pid));
  const cpu0 = procs.map((p) => cpuSeconds(p.pid));
  const t0 = performance.now();
  const ids: string[] = [];
  for (let i = 0; i < tasks; i++) ids.push(await submit(c.nc, `${label}-${process.pid}-${++seq}`, shape));
  const st = await waitAll(c.nc, ids, tick);
  const seconds = (performance.now() - t0) / 1000;
  const sessions = shape.num_samples * tasks;
  return {
    sessions,
    seconds,
    perSecond: sessions / seconds,
    cpu: Object.fromEntries(procs.map((p, i) => [p.name, cpuSeconds(p.pid) - cpu0[i]])),
    counts: counts(st),
  };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false; // exited
  }
}

/** Median RSS of the process over `ms` (sampled every 250 ms): the settled figure after work ends. */
export async function settledRss(p: Proc, ms = 3000): Promise<number> {
  const xs: number[] = [];
  for (const end = Date.now() + ms; Date.now() < end; ) {
    xs.push(rssMb(p.pid));
    await new Promise((r) => setTimeout(r, 250));
  }
  return median(xs);
}

export function fmt(x: number, digits = 1): string {
  return Number.isFinite(x) ? x.toFixed(digits) : "n/a";
}
