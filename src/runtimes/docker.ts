/**
 * The `docker` backend: one container per session (dockerode), with docker's
 * init as PID 1 so a stop never waits on a process that ignores SIGTERM.
 *
 * - Labels name the gateway and the session (reaper.ts removes leftovers).
 * - The host session directory is bound at /polar/session, the tools cache
 *   read-only at /opt/polar-tools, the workspace is the spec's workdir.
 * - Network `none` (the default): no interface but loopback; the proxy's Unix
 *   socket is bound into /polar/proxy and a forwarder (socat, or Node
 *   from the tools cache or the image) listens on 127.0.0.1:FORWARDER_PORT
 *   inside, so `proxyUrl` reaches the model proxy and nothing else is reachable.
 *   `bridge` keeps the forwarder and adds the engine's bridge; `host` shares the
 *   host network and uses the proxy's TCP URL.
 * - cpus, memory_mb and pids_limit become NanoCpus, Memory (= MemorySwap) and PidsLimit.
 */
import { basename, dirname, posix } from "node:path";
import Dockerode from "dockerode";
import { z } from "zod";
import type { RuntimeSpec } from "../protocol/schemas.ts";
import { FORWARDER_PORT, SESSION_MOUNT, SYSTEM_PATH, TOOLS_MOUNT, baseEnv, labelsOf, runtimeError } from "./common.ts";
import { FORWARDER_SCRIPT, RUNTIME_ASSETS_MOUNT, forwarderShell, waitListeningShell } from "./forwarder.ts";
import { getBytes, getPath, putBytes, putPath } from "./docker-archive.ts";
import { dockerExec } from "./docker-exec.ts";
import { ExecStatsRecorder, timed } from "./stats.ts";
import type { ExecOptions, ExecResult, ExecStats, ProxyPeers, Runtime, RuntimeContext, RuntimeFactory } from "./types.ts";
import { warnOnce } from "../util/log.ts";

export const PROXY_MOUNT = "/polar/proxy";
const DEFAULT_WORKDIR = "/workspace";

/** `spec.kwargs` the docker backend reads: extra binds ("host:container[:ro]") and the user to exec as. */
export const DockerKwargs = z.object({ volumes: z.array(z.string()).default([]), user: z.string().optional() });

export class DockerRuntime implements Runtime {
  readonly id: string;
  readonly backend = "docker";
  readonly workdir: string;
  readonly home = "/root";
  readonly #docker: Dockerode;
  readonly #spec: RuntimeSpec;
  readonly #ctx: RuntimeContext;
  readonly #stats = new ExecStatsRecorder();
  readonly #abort = new AbortController();
  #container: Dockerode.Container | undefined;
  #path = SYSTEM_PATH;
  #state: "new" | "starting" | "started" | "stopped" = "new";

  constructor(spec: RuntimeSpec, ctx: RuntimeContext, docker: Dockerode) {
    this.#spec = spec;
    this.#ctx = ctx;
    this.#docker = docker;
    this.id = ctx.role ? `polar-${ctx.sessionId.slice(0, 50)}-${ctx.role}` : `polar-${ctx.sessionId.slice(0, 55)}`;
    this.workdir = posix.resolve("/", spec.workdir ?? DEFAULT_WORKDIR);
  }

  get network(): string {
    return this.#spec.allow_internet === false ? "none" : (this.#spec.network ?? "none");
  }

  /** The forwarder runs unless the container shares the host network or there is no socket. */
  get forwarded(): boolean {
    return this.network !== "host" && this.#ctx.proxy.socketPath !== undefined;
  }

  get proxyUrl(): string {
    return this.forwarded ? `http://127.0.0.1:${FORWARDER_PORT}` : this.#ctx.proxy.url;
  }

  /**
   * Through the forwarder, the session's own socket; with the host network,
   * TCP from the container's processes (host pids, as the engine lists them).
   */
  proxyPeers(): ProxyPeers {
    return this.forwarded ? { via: "socket" } : { via: "tcp", roots: () => this.#hostPids() };
  }

  async #hostPids(): Promise<number[]> {
    if (!this.#container) return [];
    // A container that is gone lists no processes: its credential is then refused, which is right.
    const top = (await this.#container.top().catch(() => undefined)) as { Titles?: string[]; Processes?: string[][] } | undefined;
    const col = top?.Titles?.indexOf("PID") ?? -1;
    return col < 0 ? [] : (top?.Processes ?? []).map((p) => Number(p[col])).filter((n) => Number.isInteger(n) && n > 0);
  }

  /** The container's id once created. */
  get containerId(): string | undefined {
    return this.#container?.id;
  }

  async start(): Promise<void> {
    if (this.#state !== "new") throw runtimeError(`runtime ${this.id} was already started`);
    this.#state = "starting";
    if (!this.forwarded && this.network !== "host") this.#ctx.log.warn({ network: this.network }, "docker runtime: no proxy socket, the model proxy may be unreachable");
    try {
      this.#path = await this.#imagePath();
      this.#container = await this.#create();
      this.#assertNotStopped();
      await this.#container.start();
      this.#assertNotStopped();
      await this.#waitReady();
      this.#state = "started";
    } catch (e) {
      await this.#remove();
      this.#state = "stopped";
      throw e instanceof Error && "code" in e && e.code === "runtime" ? e : runtimeError(`docker runtime ${this.id} failed to start: ${(e as Error).message}`, e);
    }
  }

  async #imagePath(): Promise<string> {
    const image = this.#spec.image;
    if (!image) throw runtimeError("docker runtime needs spec.image");
    let info;
    try {
      info = await this.#docker.getImage(image).inspect();
    } catch (e) {
      throw runtimeError(`runtime.image: docker image ${image} is not present on this engine (build one with scripts/base-image.sh, or load it)`, e);
    }
    const path = (info.Config?.Env ?? []).find((v) => v.startsWith("PATH="));
    return path ? path.slice(5) : SYSTEM_PATH;
  }

  async #create(): Promise<Dockerode.Container> {
    const opts = this.#createOptions();
    try {
      return await this.#docker.createContainer(opts);
    } catch (e) {
      if ((e as { statusCode?: number }).statusCode !== 409) throw e;
      // A container left by an earlier attempt of this session: replace it.
      await this.#docker.getContainer(this.id).remove({ force: true }).catch(() => {});
      return this.#docker.createContainer(opts);
    }
  }

  #createOptions(): Dockerode.ContainerCreateOptions {
    const s = this.#spec;
    const kw = DockerKwargs.parse(s.kwargs ?? {});
    const binds = [`${this.#ctx.sessionDir}:${SESSION_MOUNT}`, `${dirname(FORWARDER_SCRIPT)}:${RUNTIME_ASSETS_MOUNT}:ro`, ...kw.volumes];
    if (this.#ctx.toolsDir) binds.push(`${this.#ctx.toolsDir}:${TOOLS_MOUNT}:ro`);
    // The socket file alone: its directory may hold other sessions' files.
    if (this.forwarded) binds.push(`${this.#ctx.proxy.socketPath!}:${PROXY_MOUNT}/${basename(this.#ctx.proxy.socketPath!)}:ro`);
    if (s.allow_internet) binds.push(...s.internet_volumes);
    // No capability beyond Docker's default set, and no gaining privileges through setuid binaries.
    const host: Dockerode.HostConfig = { Init: true, NetworkMode: this.network, Binds: binds, AutoRemove: false, SecurityOpt: ["no-new-privileges:true"] };
    if (s.cpus) host.NanoCpus = Math.round(s.cpus * 1e9);
    if (s.memory_mb) host.Memory = host.MemorySwap = s.memory_mb * 1024 * 1024;
    if (s.pids_limit) host.PidsLimit = s.pids_limit;
    if (s.gpus > 0) host.DeviceRequests = [{ Driver: "", Count: s.gpus, DeviceIDs: [], Capabilities: [["gpu"]], Options: {} }];
    if (s.storage_mb) {
      warnOnce(this.#ctx.log, "docker-storage-mb", "docker runtime: storage_mb is not applied (needs an engine with storage quotas)",
        "run dockerd with the overlay2 driver on xfs with pquota, or drop storage_mb from the runtime spec");
    }
    return {
      name: this.id,
      Image: s.image,
      Cmd: ["/bin/sh", "-c", this.#entryScript()],
      Labels: { ...labelsOf(this.#ctx), "polar.backend": "docker" },
      WorkingDir: this.workdir,
      User: kw.user,
      HostConfig: host,
    };
  }

  /** PID 1's child: the proxy forwarder when there is one, else an idle loop. */
  #entryScript(): string {
    const idle = "while :; do sleep 3600; done";
    return this.forwarded ? forwarderShell(`${PROXY_MOUNT}/${basename(this.#ctx.proxy.socketPath!)}`, idle) : idle;
  }

  /** Waits until the forwarder listens inside the container. */
  async #waitReady(): Promise<void> {
    if (!this.forwarded) return;
    const r = await dockerExec(this.#docker, this.#container!, waitListeningShell(), { cwd: "/", env: { PATH: this.#path }, signal: this.#abort.signal, timeoutMs: 30_000 });
    if (r.exitCode !== 0) {
      const logs = await this.#container!.logs({ stdout: true, stderr: true, tail: 20 }).catch(() => "");
      throw runtimeError(`docker runtime ${this.id}: the proxy forwarder did not start: ${String(logs).trim()}`);
    }
  }

  exec(command: string, opts: ExecOptions = {}): Promise<ExecResult> {
    return timed(this.#stats, opts.category, async () => {
      const container = this.#usable();
      const cwd = opts.cwd ? posix.resolve(this.workdir, opts.cwd) : this.workdir;
      const env = baseEnv({ home: this.home, tools: this.#ctx.toolsDir ? TOOLS_MOUNT : undefined, path: this.#path }, this.#spec.env, opts.env);
      const signal = opts.signal ? AbortSignal.any([opts.signal, this.#abort.signal]) : this.#abort.signal;
      try {
        return await dockerExec(this.#docker, container, command, { cwd, env, timeoutMs: opts.timeoutMs, signal, stdin: opts.stdin });
      } catch (e) {
        throw runtimeError(`docker runtime ${this.id}: exec failed: ${(e as Error).message}`, e);
      }
    });
  }

  #abs(p: string): string {
    return posix.resolve(this.workdir, p);
  }

  async upload(localPath: string, remotePath: string): Promise<void> {
    await putPath(this.#usable(), localPath, this.#abs(remotePath));
  }

  async download(remotePath: string, localPath: string): Promise<void> {
    await getPath(this.#usable(), this.#abs(remotePath), localPath);
  }

  async writeFile(remotePath: string, content: string | Uint8Array, mode?: number): Promise<void> {
    const bytes = typeof content === "string" ? new TextEncoder().encode(content) : content;
    await putBytes(this.#usable(), this.#abs(remotePath), bytes, mode);
  }

  async readFile(remotePath: string): Promise<Uint8Array> {
    return getBytes(this.#usable(), this.#abs(remotePath));
  }

  execStats(): ExecStats {
    return this.#stats.snapshot();
  }

  async cancel(): Promise<void> {
    this.#abort.abort(runtimeError(`runtime ${this.id} cancelled`));
    await this.stop();
  }

  /** Removes the container (SIGKILL, no grace); in-flight execs resolve as cancelled. */
  async stop(): Promise<void> {
    if (this.#state === "stopped") return;
    this.#state = "stopped";
    this.#abort.abort(runtimeError(`runtime ${this.id} stopped`));
    await this.#remove();
  }

  async #remove(): Promise<void> {
    if (!this.#container) return;
    try {
      await this.#container.remove({ force: true, v: true });
    } catch (e) {
      const code = (e as { statusCode?: number }).statusCode;
      if (code !== 404 && code !== 409) this.#ctx.log.warn({ err: e, container: this.#container.id }, "docker runtime: container removal failed");
    }
  }

  #assertNotStopped(): void {
    if (this.#state === "stopped") throw runtimeError(`runtime ${this.id} was stopped while starting`);
  }

  #usable(): Dockerode.Container {
    if (this.#state !== "started" || !this.#container) throw runtimeError(`runtime ${this.id} is ${this.#state === "stopped" ? "stopped" : "not started"}`);
    return this.#container;
  }
}

/** A docker factory sharing one engine client (created on first use: DOCKER_HOST or the default socket). */
export function dockerRuntimeFactory(client?: Dockerode): RuntimeFactory {
  let docker = client;
  return {
    name: "docker",
    configSchema: z.object({}).strict(),
    create: (_config, { spec, ctx }) => new DockerRuntime(spec, ctx, (docker ??= new Dockerode())),
  };
}
