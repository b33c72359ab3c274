/**
 * bubblewrap isolation for the local backend: a read-only view of the host
 * root, a private /tmp, /dev and /proc, a writable session directory, private
 * pid/ipc/uts namespaces and, unless the network is shared, a private network
 * namespace whose only way out is the model proxy's Unix socket (a forwarder
 * started inside listens on 127.0.0.1:FORWARDER_PORT).
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname } from "node:path";
import { FORWARDER_PORT } from "./common.ts";
import { FORWARDER_SCRIPT, listeningTest } from "./forwarder.ts";


export interface BwrapOptions {
  bwrap: string;
  sessionDir: string;
  cwd: string;
  /** Share the host network (no forwarder); otherwise a private network namespace. */
  shareNet: boolean;
  /** The proxy's Unix socket; with a private network a forwarder reaches it. */
  proxySocket?: string;
  /** Host directories made visible read-only at the same path (tools cache, …). */
  readOnly?: string[];
  /**
   * Host directories replaced by an empty tmpfs (besides /tmp and the session
   * directory's parent, which holds the other sessions): e.g. the gateway's HOME.
   */
  hide?: string[];
  /** Host socat binary: the forwarder when present (fast), else Node runs forwarder.mjs. */
  socat?: string;
}

export function which(name: string, path = process.env.PATH ?? ""): string | undefined {
  for (const dir of path.split(":")) if (dir && existsSync(`${dir}/${name}`)) return `${dir}/${name}`;
  return undefined;
}

/** Finds bubblewrap on PATH and checks it can create its namespaces here. */
export function probeBwrap(path = process.env.PATH ?? ""): string | undefined {
  const bin = which("bwrap", path);
  if (!bin) return undefined;
  const r = spawnSync(bin, ["--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "--proc", "/proc", "--dev", "/dev", "/bin/true"], { timeout: 10_000, stdio: "ignore" });
  return r.status === 0 ? bin : undefined;
}

/** Never hidden, whatever `hide` says: the sandbox needs them. */
const SYSTEM_DIRS = new Set(["/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/dev", "/proc", "/sys", "/var", "/opt", "/run"]);

const probed = new Map<string, string | undefined>();

/** probeBwrap, once per PATH for this process (what the host can do does not change). */
export function probeBwrapCached(path = process.env.PATH ?? ""): string | undefined {
  if (!probed.has(path)) probed.set(path, probeBwrap(path));
  return probed.get(path);
}

/**
 * The bwrap command line. Mount order matters: the read-only root, then empty
 * tmpfs over the `hide` directories (and /tmp), then the read-only binds that
 * must show through them (tools, the proxy socket file alone, the forwarder),
 * then the writable session directory.
 */
export function bwrapArgv(o: BwrapOptions, command: string): string[] {
  const argv = [o.bwrap, "--die-with-parent", "--new-session", "--unshare-ipc", "--unshare-pid", "--unshare-uts"];
  if (!o.shareNet) argv.push("--unshare-net");
  argv.push("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc");
  const hide = [...new Set(["/tmp", dirname(o.sessionDir), ...(o.hide ?? [])])].filter((d) => d !== "/" && !SYSTEM_DIRS.has(d));
  for (const dir of hide.sort((a, b) => a.length - b.length)) argv.push("--tmpfs", dir);
  const forward = !o.shareNet && o.proxySocket !== undefined;
  const ro = [...(o.readOnly ?? []), ...(forward ? [o.proxySocket!, dirname(FORWARDER_SCRIPT), dirname(o.socat ?? process.execPath)] : [])];
  for (const p of new Set(ro)) argv.push("--ro-bind", p, p);
  argv.push("--bind", o.sessionDir, o.sessionDir, "--chdir", o.cwd, "--");
  if (!forward) return [...argv, "/bin/bash", "-c", command];
  const forwarder = o.socat
    ? `${q(o.socat)} TCP-LISTEN:${FORWARDER_PORT},bind=127.0.0.1,fork,reuseaddr ${q(`UNIX-CONNECT:${o.proxySocket!}`)}`
    : `${q(process.execPath)} ${q(FORWARDER_SCRIPT)} ${FORWARDER_PORT} ${q(o.proxySocket!)}`;
  const script = [
    `${forwarder} </dev/null >/dev/null 2>&1 &`,
    `for _ in $(seq 1 1000); do ${listeningTest()} && break; sleep 0.005; done`,
    `exec /bin/bash -c "$1"`,
  ].join("\n");
  return [...argv, "/bin/bash", "-c", script, "polar-sandbox", command];
}

function q(s: string): string {
  return `'${s.replaceAll("'", `'"'"'`)}'`;
}
