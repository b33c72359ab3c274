/** Pieces every backend shares: errors, the base environment, tools paths, limits. */
import { PolarError } from "../protocol/errors.ts";
import type { RuntimeSpec } from "../protocol/schemas.ts";
import { OWNER_LABEL, ownerMarker } from "./owner.ts";

/** Where the tools cache (pinned harness CLIs and a Node runtime) appears inside a sandbox. */
export const TOOLS_MOUNT = "/opt/polar-tools";
/** Where the host session directory appears inside container sandboxes. */
export const SESSION_MOUNT = "/polar/session";
/** Port the in-sandbox forwarder listens on (inside the sandbox's own network namespace). */
export const FORWARDER_PORT = 18080;

export const SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

export function runtimeError(message: string, cause?: unknown, details?: unknown): PolarError {
  return new PolarError("runtime", message, { cause, details });
}

/** PATH entries of a tools cache rooted at `root`: its bin, node_modules/.bin and node/bin. */
export function toolsPath(root: string): string[] {
  return [`${root}/bin`, `${root}/node_modules/.bin`, `${root}/node/bin`];
}

/**
 * The environment a sandboxed command starts from (never the gateway's own
 * environment): PATH (tools first), HOME, a UTF-8 locale, then the spec's env,
 * then the call's env (later keys win).
 */
export function baseEnv(o: { home: string; tools?: string; tmp?: string; path?: string }, ...layers: (Record<string, string> | undefined)[]): Record<string, string> {
  const path = [...(o.tools ? toolsPath(o.tools) : []), o.path ?? SYSTEM_PATH].join(":");
  const env: Record<string, string> = { PATH: path, HOME: o.home, LANG: "C.UTF-8", LC_ALL: "C.UTF-8", TERM: "dumb", USER: "root" };
  if (o.tmp) env.TMPDIR = o.tmp;
  for (const l of layers) Object.assign(env, l ?? {});
  return env;
}

export interface Limits {
  cpus?: number;
  memoryMb?: number;
  pids?: number;
}

export function limitsOf(spec: RuntimeSpec): Limits {
  return { cpus: spec.cpus ?? undefined, memoryMb: spec.memory_mb ?? undefined, pids: spec.pids_limit ?? undefined };
}

/** Sandbox labels: who owns a sandbox (gateway id and owner process), so a reaper can find what a gateway left behind. */
export function labelsOf(ctx: { gatewayId: string; sessionId: string }): Record<string, string> {
  return { "polar.managed": "true", "polar.gateway": ctx.gatewayId, "polar.session": ctx.sessionId, [OWNER_LABEL]: ownerMarker() };
}

/** Delay before retry `attempt` (1-based): min(backoff * 2^(attempt-1), 5) seconds, in ms. */
export function backoffMs(backoffSeconds: number, attempt: number): number {
  return Math.min(backoffSeconds * 2 ** (attempt - 1), 5) * 1000;
}
