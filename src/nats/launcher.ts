/**
 * An embedded `nats-server` with JetStream: found on PATH (or POLAR_NATS_SERVER),
 * started on a random port with a temporary store, ready when its ports file
 * appears and it answers on the port. `stop()` ends it and removes the store.
 * Used by `polar up` and by the tests (one server per test file).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { connect as tcpConnect } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { PolarError } from "../protocol/errors.ts";
import { serverAuthConfig, type ServerTls, type ServerUser } from "../security/nats-auth.ts";

export interface NatsServerOptions {
  /** Explicit binary; default: POLAR_NATS_SERVER, then `nats-server` on PATH. */
  binary?: string;
  /** 0 or undefined: a random free port. */
  port?: number;
  /** Store directory; default: a fresh temporary directory, removed on stop. */
  storeDir?: string;
  /** Max message payload in bytes (default 8 MiB; larger payloads go to the object store). */
  maxPayload?: number;
  readyTimeoutMs?: number;
  /** Users with role permissions, or one shared token; default: no authentication. */
  auth?: ServerUser[] | { token: string };
  /** Serve TLS with this certificate (and verify client certificates against `ca_file` when `verify`). */
  tls?: ServerTls;
  /** More nats-server config lines (e.g. operator mode: `operator`, `resolver`, `resolver_preload`). */
  extraConfig?: string;
}

export interface NatsServerHandle {
  readonly url: string;
  readonly port: number;
  readonly storeDir: string;
  readonly pid: number;
  /** Stops the server (SIGTERM, then SIGKILL after 5 s) and removes a temporary store. Idempotent. */
  stop(): Promise<void>;
  /** Kills the server without removing the store (to test restarts). */
  kill(signal?: NodeJS.Signals): void;
  readonly closed: Promise<number | null>;
}

export function findNatsServer(explicit?: string): string {
  const candidates = [explicit, process.env.POLAR_NATS_SERVER].filter((c): c is string => !!c);
  for (const c of candidates) if (existsSync(c)) return c;
  for (const dir of (process.env.PATH ?? "").split(delimiter).concat(["/usr/sbin", "/usr/bin", "/usr/local/bin"])) {
    const p = join(dir, "nats-server");
    if (dir && existsSync(p)) return p;
  }
  throw new PolarError("unavailable", "nats-server not found: install it (Debian: apt-get install nats-server) or set POLAR_NATS_SERVER");
}

export async function startNatsServer(opts: NatsServerOptions = {}): Promise<NatsServerHandle> {
  const binary = findNatsServer(opts.binary);
  const tempStore = !opts.storeDir;
  const storeDir = opts.storeDir ?? (await mkdtemp(join(tmpdir(), "polar-nats-")));
  const portsDir = await mkdtemp(join(tmpdir(), "polar-nats-ports-"));
  const args = ["-js", "-sd", storeDir, "-a", "127.0.0.1", "-p", String(opts.port || -1), "--ports_file_dir", portsDir];
  // max_payload has no command-line flag in nats-server 2.9: it goes in a config file.
  const confPath = join(portsDir, "nats.conf");
  const conf = [`max_payload: ${opts.maxPayload ?? 8 * 1024 * 1024}`, serverAuthConfig(opts.auth, opts.tls), opts.extraConfig ?? ""];
  await writeFile(confPath, `${conf.join("\n")}\n`, { mode: 0o600 }); // holds passwords
  args.push("-c", confPath);
  const child = spawn(binary, args, { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  const closed = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  try {
    const port = await waitForPort(child, portsDir, opts.readyTimeoutMs ?? 10_000, () => stderr);
    return makeHandle(child, port, storeDir, tempStore, closed, portsDir);
  } catch (err) {
    child.kill("SIGKILL");
    await closed;
    await rm(portsDir, { recursive: true, force: true });
    if (tempStore) await rm(storeDir, { recursive: true, force: true });
    throw err;
  }
}

function makeHandle(
  child: ChildProcess,
  port: number,
  storeDir: string,
  tempStore: boolean,
  closed: Promise<number | null>,
  portsDir: string,
): NatsServerHandle {
  let stopping: Promise<void> | undefined;
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    storeDir,
    pid: child.pid!,
    closed,
    kill: (signal = "SIGKILL") => void child.kill(signal),
    stop() {
      stopping ??= (async () => {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill("SIGTERM");
          const t = setTimeout(() => child.kill("SIGKILL"), 5000);
          t.unref();
          await closed;
          clearTimeout(t);
        }
        await rm(portsDir, { recursive: true, force: true });
        if (tempStore) await rm(storeDir, { recursive: true, force: true });
      })();
      return stopping;
    },
  };
}

async function waitForPort(child: ChildProcess, portsDir: string, timeoutMs: number, stderr: () => string): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new PolarError("unavailable", `nats-server exited with ${child.exitCode}: ${stderr()}`);
    const port = await readPortsFile(portsDir);
    if (port && (await canConnect(port))) return port;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new PolarError("timeout", `nats-server was not ready within ${timeoutMs} ms: ${stderr()}`);
}

async function readPortsFile(dir: string): Promise<number | undefined> {
  const files = (await readdir(dir)).filter((f) => f.endsWith(".ports"));
  if (!files.length) return undefined;
  try {
    const ports = JSON.parse(await readFile(join(dir, files[0]), "utf8")) as { nats?: string[] };
    const m = /:(\d+)$/.exec(ports.nats?.[0] ?? "");
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined; // file not fully written yet
  }
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = tcpConnect({ host: "127.0.0.1", port }, () => {
      s.destroy();
      resolve(true);
    });
    s.on("error", () => resolve(false));
  });
}
