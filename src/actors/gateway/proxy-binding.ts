/**
 * Each session attempt's proxy credential, bound to its sandbox: the attempt
 * gets its own proxy socket (the only one its sandbox sees), and its runtime
 * tells the proxy where its calls come from (that socket, or its process tree
 * over host TCP). The proxy refuses the credential from anywhere else, so one
 * stolen from another session records nothing. With `bindCredentials: "off"`
 * every sandbox gets the shared socket and nothing is checked.
 */
import { createHash } from "node:crypto";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import type { PeerBinding, PeerDirectory, ProxyHandle } from "../../proxy/types.ts";
import type { Runtime, RuntimeContext } from "../../runtimes/types.ts";

interface Bound {
  attempt: number;
  binding?: PeerBinding;
  socket?: { close(): Promise<void> };
}

export class SessionBindings implements PeerDirectory {
  readonly #bySession = new Map<string, Bound>();
  readonly #socketDir: string;
  readonly #on: boolean;
  #proxy: ProxyHandle | undefined;

  /** `socketDir` holds the per-attempt sockets (kept short: a socket path has at most 107 bytes). */
  constructor(opts: { socketDir: string; mode?: "auto" | "off" }) {
    this.#socketDir = opts.socketDir;
    this.#on = opts.mode !== "off";
  }

  /** The proxy the sockets are opened on (it exists only after the directory is handed to it). */
  attach(proxy: ProxyHandle): void {
    this.#proxy = proxy;
  }

  /**
   * Opens the attempt's own socket and returns the proxy endpoint its runtime
   * gets (the TCP URL, and that socket instead of the shared one).
   */
  async open(sessionId: string, attempt: number): Promise<RuntimeContext["proxy"]> {
    const proxy = this.#proxy!;
    if (!this.#on) return { url: proxy.url, socketPath: proxy.socketPath };
    await this.close(sessionId);
    await mkdir(this.#socketDir, { recursive: true, mode: 0o700 });
    const path = join(this.#socketDir, `${createHash("sha256").update(`${sessionId}\0${attempt}`).digest("hex").slice(0, 20)}.sock`);
    const bound: Bound = { attempt };
    this.#bySession.set(sessionId, bound);
    bound.socket = await proxy.openSessionSocket(sessionId, path);
    return { url: proxy.url, socketPath: path };
  }

  /** Records where the attempt's runtime reaches the proxy from (none: the credential stays usable anywhere but other sessions' sockets). */
  bind(sessionId: string, attempt: number, runtime: Runtime): void {
    const bound = this.#bySession.get(sessionId);
    if (bound?.attempt === attempt) bound.binding = runtime.proxyPeers?.();
  }

  /** Closes the attempt's socket (all attempts' when `attempt` is omitted). */
  async close(sessionId: string, attempt?: number): Promise<void> {
    const bound = this.#bySession.get(sessionId);
    if (!bound || (attempt !== undefined && bound.attempt !== attempt)) return;
    this.#bySession.delete(sessionId);
    await bound.socket?.close();
  }

  bindingOf(sessionId: string): PeerBinding | undefined {
    return this.#bySession.get(sessionId)?.binding;
  }
}
