/**
 * Where a running `polar up` writes its URLs, one file per instance
 * (`~/.polar/up/<pid>.json`), so two instances on one machine never overwrite
 * or delete each other's. Client commands that were given no server find the
 * newest live instance and say which one they used.
 */
import { mkdir, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import type { NatsAuth } from "../security/nats-auth.ts";
import type { Role } from "../security/nats-roles.ts";

export interface UpState {
  nats_url: string;
  api_url?: string;
  dashboard_url?: string;
  proxy_url?: string;
  sim_url?: string;
  pid: number;
  started_at?: string;
  /** Credentials of the embedded server per role, for the CLI and clients of this host (the file is readable by its owner only). */
  nats_credentials?: Partial<Record<Role, NatsAuth>>;
}

/** The folder of instance files (`$POLAR_STATE_DIR`, default `~/.polar/up`). */
export function upStateDir(): string {
  return process.env.POLAR_STATE_DIR ?? join(homedir(), ".polar", "up");
}

/** This process's instance file (`$POLAR_STATE_FILE` names it explicitly). */
export function upStatePath(pid = process.pid): string {
  return process.env.POLAR_STATE_FILE ?? join(upStateDir(), `${pid}.json`);
}

export async function writeUpState(s: UpState): Promise<void> {
  const path = upStatePath(s.pid);
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, JSON.stringify({ started_at: new Date().toISOString(), ...s }, null, 2), { mode: 0o600 });
}

/** Removes this instance's file only. */
export async function clearUpState(pid = process.pid): Promise<void> {
  await rm(upStatePath(pid), { force: true });
}

export interface FoundInstance {
  state: UpState;
  path: string;
  /** Live instances found (the newest is returned). */
  live: number;
}

/** The newest live `polar up` instance, or undefined; files of dead instances are removed. */
export async function findUpInstance(): Promise<FoundInstance | undefined> {
  const files = process.env.POLAR_STATE_FILE ? [process.env.POLAR_STATE_FILE] : await listStateFiles();
  const live: Array<{ state: UpState; path: string; mtime: number }> = [];
  for (const path of files) {
    const state = await readState(path);
    if (!state) continue;
    if (!isAlive(state.pid)) {
      // A crashed instance's file: nobody else will clean it up.
      if (!process.env.POLAR_STATE_FILE) await rm(path, { force: true });
      continue;
    }
    live.push({ state, path, mtime: (await stat(path)).mtimeMs });
  }
  live.sort((a, b) => b.mtime - a.mtime);
  return live[0] ? { state: live[0].state, path: live[0].path, live: live.length } : undefined;
}

async function listStateFiles(): Promise<string[]> {
  const dir = upStateDir();
  const names = await readdir(dir).catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT") return [] as string[];
    throw err;
  });
  return names.filter((n) => n.endsWith(".json")).map((n) => join(dir, n));
}

async function readState(path: string): Promise<UpState | undefined> {
  try {
    const s = JSON.parse(await readFile(path, "utf8")) as UpState;
    return typeof s.nats_url === "string" && Number.isInteger(s.pid) ? s : undefined;
  } catch {
    return undefined; // missing, half-written or not ours: not an instance
  }
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}
