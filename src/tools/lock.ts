/**
 * A cross-process lock for the tools cache: a directory created atomically
 * with `mkdir`, holding the owner's pid. A lock whose owner is gone is taken
 * over; otherwise the caller waits (polling, abortable).
 */
import { mkdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

const POLL_MS = 250;

export async function withInstallLock<T>(dir: string, signal: AbortSignal | undefined, say: (l: string) => void, fn: () => Promise<T>): Promise<T> {
  const lock = join(dir, ".polar-install.lock");
  let announced = false;
  for (;;) {
    signal?.throwIfAborted();
    try {
      await mkdir(lock);
      await writeFile(join(lock, "pid"), String(process.pid));
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      if (await ownerIsGone(lock)) {
        await rm(lock, { recursive: true, force: true });
        continue;
      }
      if (!announced) say(`waiting for another install in ${dir}`);
      announced = true;
      await sleep(POLL_MS, undefined, { signal });
    }
  }
  try {
    return await fn();
  } finally {
    await rm(lock, { recursive: true, force: true });
  }
}

async function ownerIsGone(lock: string): Promise<boolean> {
  const pid = Number((await readFile(join(lock, "pid"), "utf8").catch(() => "")).trim());
  if (!Number.isInteger(pid) || pid <= 0) {
    // No pid yet: a racing creator, unless the directory is old (a crash between mkdir and write).
    const st = await stat(lock).catch(() => undefined);
    return st !== undefined && Date.now() - st.mtimeMs > 10_000;
  }
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ESRCH";
  }
}
