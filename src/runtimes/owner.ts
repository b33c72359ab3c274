/**
 * Which process owns a sandbox, independent of node ids: every sandbox
 * (local runtime process, Docker container) is marked with its owner's
 * `host/pid/start-time`. A gateway restarted under a new node id can then
 * tell what a dead process left behind (same host, that pid gone or reused)
 * from what a live gateway on this host still runs.
 */
import { readFileSync } from "node:fs";
import { hostname } from "node:os";

/** Environment variable of every local runtime process, and … */
export const OWNER_ENV = "POLAR_SANDBOX_OWNER";
/** … label of every container: the owner marker. */
export const OWNER_LABEL = "polar.owner";

/** Start time of a process in clock ticks since boot (`/proc/<pid>/stat` field 22), or undefined if it is gone. */
export function processStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name (which may hold spaces) start at field 3.
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined; // no such process (or /proc unreadable: then nothing is ever judged dead)
  }
}

let mine: string | undefined;

/** This process's owner marker. */
export function ownerMarker(): string {
  mine ??= `${hostname()}/${process.pid}/${processStartTime(process.pid) ?? "0"}`;
  return mine;
}

/**
 * Whether the owner named by `marker` is known to be dead: it ran on this
 * host and its pid is gone or now belongs to a process started at another
 * time. Markers of other hosts, or that do not parse, are never dead.
 */
export function ownerDead(marker: string, host = hostname()): boolean {
  const m = /^(.+)\/(\d+)\/(\d+)$/.exec(marker);
  if (!m || m[1] !== host) return false;
  if (!readableProc()) return false;
  return processStartTime(Number(m[2])) !== m[3];
}

/** /proc answers for this very process (else liveness cannot be judged and nothing is reaped). */
function readableProc(): boolean {
  return processStartTime(process.pid) !== undefined;
}
