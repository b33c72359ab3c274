/**
 * The `local` backend: a workspace directory per session on the host, every
 * command a bash process in its own process group (its tree killed on timeout
 * or cancel). With bubblewrap present the command runs isolated (see
 * bwrap.ts); otherwise as a plain process, which start() logs as a warning.
 * Limits (cpus, memory, pids) use a per-session cgroup when one can be made.
 *
 * Sandbox paths are host paths: relative ones resolve against the workspace;
 * uploads and writes must land inside the session directory.
 */
import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import type { RuntimeSpec } from "../protocol/schemas.ts";
import { bwrapArgv, probeBwrapCached, which } from "./bwrap.ts";
import { createCgroup, hasLimits, type SessionCgroup } from "./cgroups.ts";
import { FORWARDER_PORT, baseEnv, limitsOf, runtimeError } from "./common.ts";
import { assertInside, copyPath, hostPath, readHostFile, writeHostFile } from "./local-files.ts";
import { OWNER_ENV, ownerMarker } from "./owner.ts";
import { GATEWAY_MARKER_ENV, MARKER_ENV, killMarkedAndWait, killTree, runProcess } from "./process.ts";
import { ExecStatsRecorder, timed } from "./stats.ts";
import { REPO_ROOT } from "../tools/paths.ts";
import type { ExecOptions, ExecResult, ExecStats, ProxyPeers, Runtime, RuntimeContext, RuntimeFactory } from "./types.ts";
import { warnOnce } from "../util/log.ts";

/** `spec.kwargs.isolation`: "auto" (bwrap when it works), "bwrap" (required) or "none". */
export const LocalKwargs = z.object({ isolation: z.enum(["auto", "bwrap", "none"]).default("auto") });

export class LocalRuntime implements Runtime {
  readonly id: string;
  readonly backend = "local";
  readonly workdir: string;
  readonly home: string;
  readonly #tmp: string;
  readonly #spec: RuntimeSpec;
  readonly #ctx: RuntimeContext;
  readonly #isolation: "auto" | "bwrap" | "none";
  readonly #stats = new ExecStatsRecorder();
  readonly #live = new Set<number>();
  /** Processes asked for whose pid is not known yet (the spawner reports it a little later). */
  readonly #starting = new Set<Promise<void>>();
  readonly #abort = new AbortController();
  #bwrap: string | undefined;
  #socat: string | undefined;
  #cgroup: SessionCgroup | undefined;
  #state: "new" | "started" | "stopped" = "new";

  constructor(spec: RuntimeSpec, ctx: RuntimeContext) {
    this.#spec = spec;
    this.#ctx = ctx;
    this.id = `polar-local-${ctx.sessionId}${ctx.role ? `-${ctx.role}` : ""}`;
    const ws = join(ctx.sessionDir, "workspace");
    this.workdir = spec.workdir ? hostPath(ws, spec.workdir) : ws;
    this.home = join(ctx.sessionDir, "home");
    this.#tmp = join(ctx.sessionDir, "tmp");
    const kw = LocalKwargs.safeParse(spec.kwargs ?? {});
    this.#isolation = kw.success ? kw.data.isolation : "auto";
    // Decided here, not in start(), so proxyUrl is right from the start.
    this.#bwrap = this.#isolation === "none" ? undefined : probeBwrapCached();
    this.#socat = this.#bwrap ? which("socat") : undefined;
  }

  /** True when commands run under bubblewrap. */
  get isolated(): boolean {
    return this.#bwrap !== undefined;
  }

  get proxyUrl(): string {
    return this.#privateNet() ? `http://127.0.0.1:${FORWARDER_PORT}` : this.#ctx.proxy.url;
  }

  /** A private network reaches the proxy only through the socket; otherwise host TCP from the commands' process trees. */
  proxyPeers(): ProxyPeers {
    return this.#privateNet() ? { via: "socket" } : { via: "tcp", roots: () => this.#roots() };
  }

  /**
   * The pids of the processes running now. A process can connect to the proxy
   * before its pid has reached us (it is started by the spawner process), so
   * this first waits, up to 10 s, for every pid still on its way.
   */
  async #roots(): Promise<Iterable<number>> {
    if (this.#starting.size) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([Promise.all(this.#starting), new Promise((r) => (timer = setTimeout(r, 10_000)))]);
      clearTimeout(timer);
    }
    return this.#live;
  }

  async start(): Promise<void> {
    if (this.#state !== "new") throw runtimeError(`runtime ${this.id} was already started`);
    assertInside(this.#ctx.sessionDir, this.workdir, "workdir");
    try {
      for (const d of [this.workdir, this.home, this.#tmp]) await mkdir(d, { recursive: true });
    } catch (e) {
      throw runtimeError(`cannot create the workspace of ${this.id}`, e);
    }
    this.#logIsolation();
    const limits = limitsOf(this.#spec);
    this.#cgroup = await createCgroup(`polar-${this.#ctx.sessionId}${this.#ctx.role ? `-${this.#ctx.role}` : ""}`, limits);
    if (hasLimits(limits) && !this.#cgroup) {
      warnOnce(this.#ctx.log, "local-no-cgroups", "local runtime: cgroups unavailable, resource limits are not applied",
        "run the gateway as root on a host with a writable cgroup v2 hierarchy (/sys/fs/cgroup), or use the docker backend", { limits });
    }
    this.#state = "started";
  }

  #logIsolation(): void {
    if (this.#isolation === "none") {
      this.#ctx.log.info("local runtime: plain processes (isolation none requested)");
      return;
    }
    if (this.#bwrap) {
      if (this.#privateNet()) return void this.#ctx.log.info({ bwrap: this.#bwrap }, "local runtime: bubblewrap isolation (private network, proxy via socket forwarder)");
      this.#ctx.log.warn(
        { bwrap: this.#bwrap, network: this.#spec.network },
        "local runtime: bubblewrap isolation with the HOST network: the sandbox can reach every service listening on this host and its networks (NATS, the task API, the proxy, metadata addresses); those must require credentials",
      );
      return;
    }
    // Never silently unisolated: without bubblewrap only an explicit `isolation: none` runs (task runtime or gateway default_runtime).
    throw runtimeError(
      `local runtime: bubblewrap is missing or cannot create namespaces, so isolation ${this.#isolation} cannot be given; install it (Debian: apt-get install bubblewrap), use the docker backend, or set runtime.kwargs.isolation to "none" to run the harness as a plain host process`,
    );
  }

  /** A private network needs the proxy's Unix socket; without one the network is shared. */
  #privateNet(): boolean {
    const net = this.#spec.network ?? "none";
    return this.#bwrap !== undefined && net === "none" && this.#ctx.proxy.socketPath !== undefined;
  }

  exec(command: string, opts: ExecOptions = {}): Promise<ExecResult> {
    return timed(this.#stats, opts.category, async () => {
      this.#assertUsable();
      const cwd = opts.cwd ? hostPath(this.workdir, opts.cwd) : this.workdir;
      if (!existsSync(cwd)) return missingCwd(cwd);
      const env = baseEnv({ home: this.home, tools: this.#ctx.toolsDir, tmp: this.#tmp }, this.#spec.env, opts.env, { [MARKER_ENV]: this.id, [GATEWAY_MARKER_ENV]: this.#ctx.gatewayId, [OWNER_ENV]: ownerMarker() });
      const signal = opts.signal ? AbortSignal.any([opts.signal, this.#abort.signal]) : this.#abort.signal;
      let pid: number | undefined;
      let started!: () => void;
      const starting = new Promise<void>((r) => (started = r));
      this.#starting.add(starting);
      try {
        return await runProcess(this.#argv(command, cwd), {
          cwd,
          env,
          timeoutMs: opts.timeoutMs,
          signal,
          stdin: opts.stdin,
          onSpawn: (p) => {
            this.#live.add((pid = p));
            this.#starting.delete(starting);
            started();
          },
        });
      } catch (e) {
        throw runtimeError(`local runtime ${this.id}: cannot run a command`, e);
      } finally {
        this.#starting.delete(starting);
        started();
        if (pid !== undefined) this.#live.delete(pid);
      }
    });
  }

  #argv(command: string, cwd: string): string[] {
    const inner = this.#bwrap
      ? bwrapArgv(
          {
            bwrap: this.#bwrap,
            sessionDir: this.#ctx.sessionDir,
            cwd,
            shareNet: !this.#privateNet(),
            proxySocket: this.#ctx.proxy.socketPath,
            // polar's own installation (scripts a task names, the forwarder) shows read-only, wherever it lives; its state (.polar) does not, except the tools cache.
            readOnly: [REPO_ROOT, ...(this.#ctx.toolsDir ? [this.#ctx.toolsDir] : [])],
            hide: [`${REPO_ROOT}/.polar`, ...(process.env.HOME ? [process.env.HOME] : [])],
            socat: this.#socat,
          },
          command,
        )
      : ["/bin/bash", "-c", command];
    if (!this.#cgroup) return inner;
    const join = this.#cgroup.procsFiles.map((f) => `echo $$ > '${f}'`).join(" && ");
    return ["/bin/sh", "-c", `${join} && exec "$@"`, "polar-cgroup", ...inner];
  }

  async upload(localPath: string, remotePath: string): Promise<void> {
    this.#assertUsable();
    const dst = this.#writable(remotePath, "upload target");
    await copyPath(localPath, dst);
  }

  async download(remotePath: string, localPath: string): Promise<void> {
    this.#assertUsable();
    await copyPath(hostPath(this.workdir, remotePath), localPath);
  }

  async writeFile(remotePath: string, content: string | Uint8Array, mode?: number): Promise<void> {
    this.#assertUsable();
    await writeHostFile(this.#writable(remotePath, "file"), content, mode);
  }

  async readFile(remotePath: string): Promise<Uint8Array> {
    this.#assertUsable();
    return readHostFile(hostPath(this.workdir, remotePath));
  }

  execStats(): ExecStats {
    return this.#stats.snapshot();
  }

  async cancel(): Promise<void> {
    this.#abort.abort(runtimeError(`runtime ${this.id} cancelled`));
    for (const pid of this.#live) killTree(pid);
    await this.stop();
  }

  async stop(): Promise<void> {
    if (this.#state === "stopped") return;
    this.#state = "stopped";
    for (const pid of this.#live) killTree(pid);
    const left = await killMarkedAndWait(MARKER_ENV, this.id); // background processes an exec left behind
    if (left > 0) this.#ctx.log.warn({ left }, "local runtime: processes survived SIGKILL");
    await this.#cgroup?.remove();
  }

  #writable(p: string, what: string): string {
    const h = hostPath(this.workdir, p);
    assertInside(this.#ctx.sessionDir, h, what);
    return h;
  }

  #assertUsable(): void {
    if (this.#state !== "started") throw runtimeError(`runtime ${this.id} is ${this.#state === "new" ? "not started" : "stopped"}`);
  }
}

/** As a container engine answers an exec in a missing directory: exit 126, nothing run. */
function missingCwd(cwd: string): ExecResult {
  return { stdout: "", stderr: `polar: cwd ${cwd} does not exist\n`, exitCode: 126, timedOut: false, cancelled: false, durationMs: 0 };
}

export const localRuntimeFactory: RuntimeFactory = {
  name: "local",
  configSchema: z.object({}).strict(),
  create: (_config, { spec, ctx }) => new LocalRuntime(spec, ctx),
};
