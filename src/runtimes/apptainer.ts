/**
 * The `apptainer` backend (HPC hosts): one instance per session, commands via
 * `exec instance://…` (see apptainer-commands.ts for the exact command lines).
 * Network `none` unless the spec says otherwise; the model proxy is reached
 * through its Unix socket and an in-instance forwarder, as with docker.
 * Transfers go through a staging directory inside the bound session
 * directory, then `cp -a` inside the instance, so any sandbox path works.
 *
 * Not exercised against a real apptainer binary in this repository's CI (it
 * is not packaged for Debian 12); the command lines are tested as built.
 */
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import { join, posix } from "node:path";
import { z } from "zod";
import type { RuntimeSpec } from "../protocol/schemas.ts";
import { apptainerEnv, execArgv, instanceName, instanceStartArgv, instanceStopArgv, PROXY_MOUNT } from "./apptainer-commands.ts";
import { FORWARDER_PORT, SESSION_MOUNT, TOOLS_MOUNT, baseEnv, runtimeError } from "./common.ts";
import { forwarderShell, waitListeningShell } from "./forwarder.ts";
import { copyPath, readHostFile, writeHostFile } from "./local-files.ts";
import { type ProcessOptions, runProcess } from "./process.ts";
import { ExecStatsRecorder, timed } from "./stats.ts";
import type { ExecOptions, ExecResult, ExecStats, ProxyPeers, Runtime, RuntimeContext, RuntimeFactory } from "./types.ts";

export type Runner = (argv: string[], opts: ProcessOptions) => Promise<ExecResult>;
export const ApptainerKwargs = z.object({ volumes: z.array(z.string()).default([]), binary: z.string().optional() });

export class ApptainerRuntime implements Runtime {
  readonly id: string;
  readonly backend = "apptainer";
  readonly workdir: string;
  readonly home = "/root";
  readonly #spec: RuntimeSpec;
  readonly #ctx: RuntimeContext;
  readonly #run: Runner;
  readonly #binary: string;
  readonly #stats = new ExecStatsRecorder();
  readonly #abort = new AbortController();
  #state: "new" | "started" | "stopped" = "new";
  #forwarder: Promise<ExecResult> | undefined;

  constructor(spec: RuntimeSpec, ctx: RuntimeContext, run: Runner = runProcess) {
    this.#spec = spec;
    this.#ctx = ctx;
    this.#run = run;
    const kw = ApptainerKwargs.parse(spec.kwargs ?? {});
    this.#binary = kw.binary ?? findBinary() ?? "apptainer";
    this.id = instanceName(ctx.role ? `${ctx.sessionId}-${ctx.role}` : ctx.sessionId);
    this.workdir = posix.resolve("/", spec.workdir ?? `${SESSION_MOUNT}/workspace`);
  }

  get network(): string {
    return this.#spec.allow_internet === false ? "none" : (this.#spec.network ?? "none");
  }

  get forwarded(): boolean {
    return this.network !== "host" && this.#ctx.proxy.socketPath !== undefined;
  }

  /** Through the forwarder, the session's own socket; with the host network it cannot tell (the credential is not bound). */
  proxyPeers(): ProxyPeers | undefined {
    return this.forwarded ? { via: "socket" } : undefined;
  }

  get proxyUrl(): string {
    return this.forwarded ? `http://127.0.0.1:${FORWARDER_PORT}` : this.#ctx.proxy.url;
  }

  #hostEnv(env: Record<string, string> = {}): Record<string, string> {
    return apptainerEnv(env);
  }

  async start(): Promise<void> {
    if (this.#state !== "new") throw runtimeError(`runtime ${this.id} was already started`);
    this.#state = "started";
    const overlayDir = join(this.#ctx.sessionDir, ".apptainer-overlay");
    const homeDir = join(this.#ctx.sessionDir, ".apptainer-home");
    await Promise.all([overlayDir, homeDir, this.#staging()].map((d) => mkdir(d, { recursive: true })));
    const argv = instanceStartArgv({
      binary: this.#binary,
      name: this.id,
      spec: this.#spec,
      sessionDir: this.#ctx.sessionDir,
      overlayDir,
      homeDir,
      home: this.home,
      toolsDir: this.#ctx.toolsDir,
      proxySocket: this.forwarded ? this.#ctx.proxy.socketPath : undefined,
      network: this.network,
      volumes: ApptainerKwargs.parse(this.#spec.kwargs ?? {}).volumes,
    });
    try {
      await this.#must(argv, "instance start");
      await this.#must(execArgv(this.#binary, this.id, "/", `mkdir -p '${this.workdir}'`), "workdir creation");
      if (this.forwarded) await this.#startForwarder();
    } catch (e) {
      await this.stop();
      throw e;
    }
  }

  async #startForwarder(): Promise<void> {
    const sock = `${PROXY_MOUNT}/${posix.basename(this.#ctx.proxy.socketPath!)}`;
    const argv = execArgv(this.#binary, this.id, "/", forwarderShell(sock, "exit 1"));
    this.#forwarder = this.#run(argv, { env: this.#hostEnv(this.#env()), signal: this.#abort.signal });
    this.#forwarder.catch(() => {});
    await this.#must(execArgv(this.#binary, this.id, "/", waitListeningShell()), "proxy forwarder start");
  }

  async #must(argv: string[], what: string): Promise<void> {
    let r: ExecResult;
    try {
      r = await this.#run(argv, { env: this.#hostEnv(this.#env()), timeoutMs: 600_000, signal: this.#abort.signal });
    } catch (e) {
      throw runtimeError(`apptainer runtime ${this.id}: ${what} failed: ${(e as Error).message} (is apptainer installed?)`, e);
    }
    if (r.exitCode !== 0) throw runtimeError(`apptainer runtime ${this.id}: ${what} failed (exit ${r.exitCode}): ${r.stderr.trim()}`, undefined, { argv });
  }

  #env(extra?: Record<string, string>): Record<string, string> {
    return baseEnv({ home: this.home, tools: this.#ctx.toolsDir ? TOOLS_MOUNT : undefined }, this.#spec.env, extra);
  }

  exec(command: string, opts: ExecOptions = {}): Promise<ExecResult> {
    return timed(this.#stats, opts.category, async () => {
      this.#usable();
      const cwd = opts.cwd ? posix.resolve(this.workdir, opts.cwd) : this.workdir;
      const signal = opts.signal ? AbortSignal.any([opts.signal, this.#abort.signal]) : this.#abort.signal;
      try {
        return await this.#run(execArgv(this.#binary, this.id, cwd, command), { env: this.#hostEnv(this.#env(opts.env)), timeoutMs: opts.timeoutMs, signal, stdin: opts.stdin });
      } catch (e) {
        throw runtimeError(`apptainer runtime ${this.id}: exec failed: ${(e as Error).message}`, e);
      }
    });
  }

  #staging(): string {
    return join(this.#ctx.sessionDir, ".transfer");
  }

  /** Runs `cp -a` inside the instance (transfers outside the bound session directory). */
  async #copyInside(from: string, to: string): Promise<void> {
    const q = (s: string) => `'${s.replaceAll("'", `'"'"'`)}'`;
    const r = await this.exec(`mkdir -p ${q(posix.dirname(to))} && rm -rf ${q(to)} && cp -a ${q(from)} ${q(to)}`, { category: "transfer" });
    if (r.exitCode !== 0) throw runtimeError(`apptainer runtime ${this.id}: copy ${from} -> ${to} failed: ${r.stderr.trim()}`);
  }

  /** A sandbox path inside /polar/session maps to the host session directory. */
  #hostPathOf(remote: string): string | undefined {
    const abs = posix.resolve(this.workdir, remote);
    const rel = posix.relative(SESSION_MOUNT, abs);
    return rel.startsWith("..") ? undefined : join(this.#ctx.sessionDir, rel);
  }

  async #viaStaging<T>(fn: (host: string, inside: string) => Promise<T>): Promise<T> {
    const id = randomUUID();
    try {
      return await fn(join(this.#staging(), id), `${SESSION_MOUNT}/.transfer/${id}`);
    } finally {
      await rm(join(this.#staging(), id), { recursive: true, force: true });
    }
  }

  async upload(localPath: string, remotePath: string): Promise<void> {
    this.#usable();
    const direct = this.#hostPathOf(remotePath);
    if (direct) return copyPath(localPath, direct);
    await this.#viaStaging(async (host, inside) => {
      await copyPath(localPath, host);
      await this.#copyInside(inside, posix.resolve(this.workdir, remotePath));
    });
  }

  async download(remotePath: string, localPath: string): Promise<void> {
    this.#usable();
    const direct = this.#hostPathOf(remotePath);
    if (direct) return copyPath(direct, localPath);
    await this.#viaStaging(async (host, inside) => {
      await this.#copyInside(posix.resolve(this.workdir, remotePath), inside);
      await copyPath(host, localPath);
    });
  }

  async writeFile(remotePath: string, content: string | Uint8Array, mode?: number): Promise<void> {
    this.#usable();
    const direct = this.#hostPathOf(remotePath);
    if (direct) return writeHostFile(direct, content, mode);
    await this.#viaStaging(async (host, inside) => {
      await writeHostFile(host, content, mode);
      await this.#copyInside(inside, posix.resolve(this.workdir, remotePath));
    });
  }

  async readFile(remotePath: string): Promise<Uint8Array> {
    this.#usable();
    const direct = this.#hostPathOf(remotePath);
    if (direct) return readHostFile(direct);
    return this.#viaStaging(async (host, inside) => {
      await this.#copyInside(posix.resolve(this.workdir, remotePath), inside);
      return readHostFile(host);
    });
  }

  execStats(): ExecStats {
    return this.#stats.snapshot();
  }

  async cancel(): Promise<void> {
    this.#abort.abort(runtimeError(`runtime ${this.id} cancelled`));
    await this.stop();
  }

  async stop(): Promise<void> {
    if (this.#state === "stopped") return;
    const wasStarted = this.#state === "started";
    this.#state = "stopped";
    this.#abort.abort(runtimeError(`runtime ${this.id} stopped`));
    if (!wasStarted) return;
    try {
      await this.#run(instanceStopArgv(this.#binary, this.id), { env: this.#hostEnv(), timeoutMs: 30_000 });
    } catch (e) {
      this.#ctx.log.warn({ err: e, instance: this.id }, "apptainer runtime: instance stop failed");
    }
    await this.#forwarder;
  }

  #usable(): void {
    if (this.#state !== "started") throw runtimeError(`runtime ${this.id} is ${this.#state === "stopped" ? "stopped" : "not started"}`);
  }
}

function findBinary(): string | undefined {
  for (const name of ["apptainer", "singularity"]) {
    for (const dir of (process.env.PATH ?? "").split(":")) if (dir && existsSync(`${dir}/${name}`)) return `${dir}/${name}`;
  }
  return undefined;
}

export const apptainerRuntimeFactory: RuntimeFactory = {
  name: "apptainer",
  configSchema: z.object({}).strict(),
  create: (_config, { spec, ctx }) => new ApptainerRuntime(spec, ctx),
};
