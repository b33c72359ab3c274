/**
 * Finding the processes marked with `name=value` in their environment means
 * reading every /proc/<pid>/environ on the host. A gateway stopping many
 * runtimes at once would pay that pass once per runtime (with 1,024 live
 * sessions, thousands of files per stop, read synchronously on the event
 * loop). Here one asynchronous pass answers every caller that was waiting
 * when it began; callers arriving during a pass wait for the next one (a
 * pass already under way may have passed their strays' pids).
 */
import { readdir, readFile } from "node:fs/promises";

interface Want {
  needle: Buffer;
  head: Buffer;
  resolve(pids: number[]): void;
}

/** Files read at once during a pass. */
const PARALLEL = 32;

let pending: Want[] = [];
let scanning = false;

/** Pids of live processes (other than this one) whose environment holds `name=value`. */
export function findMarked(name: string, value: string): Promise<number[]> {
  return new Promise((resolve) => {
    pending.push({ needle: Buffer.from(`\0${name}=${value}\0`), head: Buffer.from(`${name}=${value}\0`), resolve });
    if (!scanning) {
      scanning = true;
      void passes();
    }
  });
}

async function passes(): Promise<void> {
  try {
    while (pending.length) {
      const batch = pending;
      pending = [];
      const found = batch.map((): number[] => []);
      try {
        await scan(batch, found);
      } finally {
        batch.forEach((w, i) => w.resolve(found[i]));
      }
    }
  } finally {
    scanning = false;
  }
}

async function scan(batch: Want[], found: number[][]): Promise<void> {
  // /proc unreadable (not Linux): nothing can be found.
  const pids = (await readdir("/proc").catch(() => [] as string[])).filter((e) => /^\d+$/.test(e) && Number(e) !== process.pid);
  let next = 0;
  const worker = async () => {
    while (next < pids.length) {
      const pid = pids[next++];
      let env: Buffer;
      try {
        env = await readFile(`/proc/${pid}/environ`);
      } catch {
        continue; // exited while we looked, or not ours to read
      }
      batch.forEach((w, i) => {
        if (env.includes(w.needle) || env.subarray(0, w.head.length).equals(w.head)) found[i].push(Number(pid));
      });
    }
  };
  await Promise.all(Array.from({ length: PARALLEL }, worker));
}
