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
import type { PeerBinding, PeerDirectory, ProxyHandle, ProxySession } from "../../proxy/types.ts";
import type { Runtime, RuntimeContext } from "../../runtimes/types.ts";

interface Bound {
  binding?: PeerBinding;
  socket?: { close(): Promise<void> };
}

export class SessionBindings implements PeerDirectory {
  /** By `<session id>\0<attempt>`: a redelivered attempt on this gateway never touches an older one's socket. */
  readonly #byAttempt = new Map<string, Bound>();
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
    const key = keyOf(sessionId, attempt);
    await this.close(sessionId, attempt);
    await mkdir(this.#socketDir, { recursive: true, mode: 0o700 });
    const path = join(this.#socketDir, `${createHash("sha256").update(key).digest("hex").slice(0, 20)}.sock`);
    const bound: Bound = {};
    this.#byAttempt.set(key, bound);
    bound.socket = await proxy.openSessionSocket(sessionId, path);
    return { url: proxy.url, socketPath: path };
  }

  /** Records where the attempt's runtime reaches the proxy from (none: the credential stays usable anywhere but other sessions' sockets). */
  bind(sessionId: string, attempt: number, runtime: Runtime): void {
    const bound = this.#byAttempt.get(keyOf(sessionId, attempt));
    if (bound) bound.binding = runtime.proxyPeers?.();
  }

  /** Closes the attempt's socket and forgets its binding. */
  async close(sessionId: string, attempt: number): Promise<void> {
    const key = keyOf(sessionId, attempt);
    const bound = this.#byAttempt.get(key);
    if (!bound) return;
    this.#byAttempt.delete(key);
    await bound.socket?.close();
  }

  bindingOf(session: ProxySession): PeerBinding | undefined {
    return this.#byAttempt.get(keyOf(session.sessionId, session.attempt))?.binding;
  }
}

function keyOf(sessionId: string, attempt: number): string {
  return `${sessionId}\0${attempt}`;
}
