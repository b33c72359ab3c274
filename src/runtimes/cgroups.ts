/**
 * Resource limits for host-process sandboxes (local backend): one cgroup per
 * session (v2 unified, or v1 cpu/memory/pids hierarchies), which every exec
 * joins before it starts its command. Unavailable cgroups are reported, not
 * faked: `create` returns undefined and the caller logs that limits are off.
 */
import { existsSync } from "node:fs";
import { mkdir, readFile, rmdir, writeFile } from "node:fs/promises";
import type { Limits } from "./common.ts";

const ROOT = "/sys/fs/cgroup";
const CPU_PERIOD_US = 100_000;

export interface SessionCgroup {
  /** The cgroup.procs files a process writes its pid into to join. */
  procsFiles: string[];
  remove(): Promise<void>;
}

export function hasLimits(l: Limits): boolean {
  return l.cpus !== undefined || l.memoryMb !== undefined || l.pids !== undefined;
}

export async function createCgroup(name: string, limits: Limits): Promise<SessionCgroup | undefined> {
  if (!hasLimits(limits)) return undefined;
  try {
    return existsSync(`${ROOT}/cgroup.controllers`) ? await createV2(name, limits) : await createV1(name, limits);
  } catch {
    return undefined;
  }
}

/** Whether this process can make limit cgroups here (root with a writable cgroup fs). */
export async function cgroupsUsable(): Promise<boolean> {
  const cg = await createCgroup(`polar-probe-${process.pid}`, { pids: 1000 });
  await cg?.remove();
  return cg !== undefined;
}

async function createV2(name: string, l: Limits): Promise<SessionCgroup> {
  const dir = `${ROOT}/${name}`;
  const wanted = [l.cpus !== undefined && "+cpu", l.memoryMb !== undefined && "+memory", l.pids !== undefined && "+pids"].filter(Boolean);
  await writeFile(`${ROOT}/cgroup.subtree_control`, wanted.join(" "));
  await mkdir(dir, { recursive: true });
  if (l.cpus !== undefined) await writeFile(`${dir}/cpu.max`, `${Math.round(l.cpus * CPU_PERIOD_US)} ${CPU_PERIOD_US}`);
  if (l.memoryMb !== undefined) await writeFile(`${dir}/memory.max`, String(l.memoryMb * 1024 * 1024));
  if (l.pids !== undefined) await writeFile(`${dir}/pids.max`, String(l.pids));
  return { procsFiles: [`${dir}/cgroup.procs`], remove: () => removeDirs([dir]) };
}

async function createV1(name: string, l: Limits): Promise<SessionCgroup> {
  const dirs: string[] = [];
  const make = async (ctrl: string): Promise<string> => {
    const dir = `${ROOT}/${ctrl}/${name}`;
    await mkdir(dir, { recursive: true });
    dirs.push(dir);
    return dir;
  };
  try {
    if (l.cpus !== undefined) {
      const d = await make("cpu");
      await writeFile(`${d}/cpu.cfs_period_us`, String(CPU_PERIOD_US));
      await writeFile(`${d}/cpu.cfs_quota_us`, String(Math.round(l.cpus * CPU_PERIOD_US)));
    }
    if (l.memoryMb !== undefined) await writeFile(`${await make("memory")}/memory.limit_in_bytes`, String(l.memoryMb * 1024 * 1024));
    if (l.pids !== undefined) await writeFile(`${await make("pids")}/pids.max`, String(l.pids));
  } catch (e) {
    await removeDirs(dirs);
    throw e;
  }
  return { procsFiles: dirs.map((d) => `${d}/cgroup.procs`), remove: () => removeDirs(dirs) };
}

/** Removes cgroup directories, killing any process still in them first. */
async function removeDirs(dirs: string[]): Promise<void> {
  for (const dir of dirs) {
    try {
      const pids = (await readFile(`${dir}/cgroup.procs`, "utf8")).split("\n").filter(Boolean);
      for (const p of pids) {
        try {
          process.kill(Number(p), "SIGKILL");
        } catch {
          // gone
        }
      }
      await rmdirRetry(dir);
    } catch {
      // already removed
    }
  }
}

async function rmdirRetry(dir: string): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      await rmdir(dir);
      return;
    } catch (e) {
      if (i >= 50) throw e;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}
