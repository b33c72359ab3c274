/**
 * The Apptainer command lines (POLAR-REFERENCE §7), as pure functions so they
 * are tested on what they build: `instance start` once per session, commands
 * through `exec instance://<name>`, `instance stop --force` at the end.
 * The environment goes in through APPTAINERENV_* variables with --cleanenv,
 * so values may hold any character and the host environment never leaks in.
 */
import { createHash } from "node:crypto";
import { basename, dirname } from "node:path";
import type { RuntimeSpec } from "../protocol/schemas.ts";
import { SESSION_MOUNT, TOOLS_MOUNT } from "./common.ts";
import { FORWARDER_SCRIPT, RUNTIME_ASSETS_MOUNT } from "./forwarder.ts";

export const PROXY_MOUNT = "/polar/proxy";

export interface InstanceInput {
  binary: string;
  name: string;
  spec: RuntimeSpec;
  sessionDir: string;
  /** A host directory used as the writable overlay (so paths outside the binds are writable). */
  overlayDir: string;
  /** Host directory shown as the agent's HOME (`--home src:dest`). */
  homeDir: string;
  home: string;
  toolsDir?: string;
  /** The proxy's Unix socket, bound alone (its directory may hold other sessions' files). */
  proxySocket?: string;
  /** Network namespace name; "host" (or undefined) means the host's network. */
  network: string;
  volumes: string[];
}

export function instanceName(sessionId: string): string {
  const sha8 = createHash("sha256").update(sessionId).digest("hex").slice(0, 8);
  return `polar-${sessionId.slice(0, 30).replace(/[^A-Za-z0-9_.-]/g, "_")}-${sha8}`;
}

export function instanceStartArgv(i: InstanceInput): string[] {
  const s = i.spec;
  const argv = [i.binary, "instance", "start", "--cleanenv", "--no-mount", "cwd,bind-paths", "--home", `${i.homeDir}:${i.home}`, "--overlay", i.overlayDir];
  if (s.gpus > 0) argv.push("--nv");
  if (i.network !== "host") argv.push("--net", "--network", i.network);
  if (s.cpus) argv.push("--cpus", String(s.cpus));
  if (s.memory_mb) argv.push("--memory", `${s.memory_mb}M`);
  if (s.pids_limit) argv.push("--pids-limit", String(s.pids_limit));
  const binds = [`${i.sessionDir}:${SESSION_MOUNT}`, `${dirname(FORWARDER_SCRIPT)}:${RUNTIME_ASSETS_MOUNT}:ro`, ...i.volumes];
  if (i.toolsDir) binds.push(`${i.toolsDir}:${TOOLS_MOUNT}:ro`);
  if (i.proxySocket) binds.push(`${i.proxySocket}:${PROXY_MOUNT}/${basename(i.proxySocket)}:ro`);
  if (s.allow_internet) binds.push(...s.internet_volumes);
  for (const b of binds) argv.push("--bind", b);
  argv.push(s.image!, i.name);
  return argv;
}

export function execArgv(binary: string, name: string, cwd: string, command: string): string[] {
  return [binary, "exec", "--cleanenv", "--pwd", cwd, `instance://${name}`, "/bin/bash", "-c", command];
}

export function instanceStopArgv(binary: string, name: string): string[] {
  return [binary, "instance", "stop", "--force", name];
}

/** The host environment of an apptainer call: each sandbox variable as APPTAINERENV_<name> (HOME comes from --home). */
export function apptainerEnv(env: Record<string, string>, host: Record<string, string | undefined> = process.env): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of ["PATH", "HOME", "USER", "TMPDIR", "XDG_RUNTIME_DIR"]) if (host[k] !== undefined) out[k] = host[k]!;
  for (const [k, v] of Object.entries(env)) if (k !== "HOME") out[`APPTAINERENV_${k}`] = v;
  return out;
}
