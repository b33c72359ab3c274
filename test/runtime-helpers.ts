/** Shared fixtures for runtime tests: a stand-in model proxy, a stand-in NATS port, contexts. */
import { randomBytes } from "node:crypto";
import { chmod, copyFile, link, mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import http from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { silentLogger } from "../src/util/log.ts";
import type { RuntimeContext } from "../src/runtimes/types.ts";

export interface FakeProxy {
  url: string;
  socketPath: string;
  dir: string;
  /** Requests seen, as "METHOD path via". */
  seen: string[];
  close(): Promise<void>;
}

/** An HTTP server on a Unix socket and on 127.0.0.1:0 that answers JSON naming how it was reached. */
export async function startFakeProxy(): Promise<FakeProxy> {
  const dir = await mkdtemp(join(tmpdir(), "polar-proxy-"));
  const socketPath = join(dir, "proxy.sock");
  const seen: string[] = [];
  const handler = (via: string) => (req: http.IncomingMessage, res: http.ServerResponse) => {
    seen.push(`${req.method} ${req.url} ${via}`);
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ ok: true, path: req.url, via }));
  };
  const tcp = http.createServer(handler("tcp"));
  const unix = http.createServer(handler("unix"));
  await new Promise<void>((r) => tcp.listen(0, "127.0.0.1", r));
  await new Promise<void>((r) => unix.listen(socketPath, r));
  await chmod(socketPath, 0o777);
  const port = (tcp.address() as net.AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    socketPath,
    dir,
    seen,
    async close() {
      tcp.closeAllConnections();
      unix.closeAllConnections();
      await Promise.all([new Promise((r) => tcp.close(r)), new Promise((r) => unix.close(r))]);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A TCP listener standing in for the NATS port; counts accepted connections. */
export async function startFakeNats(): Promise<{ port: number; accepted: () => number; close(): Promise<void> }> {
  let n = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    n++;
    sockets.add(s);
    s.end("INFO {}\r\n");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as net.AddressInfo).port,
    accepted: () => n,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

export async function makeSessionDir(prefix = "polar-rt-"): Promise<string> {
  return mkdtemp(join(tmpdir(), prefix));
}

export function makeCtx(sessionDir: string, proxy: { url: string; socketPath?: string }, extra: Partial<RuntimeContext> = {}): RuntimeContext {
  const sessionId = `t${randomBytes(6).toString("hex")}`;
  return { sessionId, gatewayId: "gw-test", proxy, sessionDir, log: silentLogger(), ...extra };
}

/** A directory tree with binary content, several modes, an empty dir and a symlink. */
export async function makeTree(root: string): Promise<void> {
  await mkdir(join(root, "sub/deeper"), { recursive: true });
  await mkdir(join(root, "empty"));
  const all = Buffer.alloc(256 * 4);
  for (let i = 0; i < all.length; i++) all[i] = i % 256;
  await writeFile(join(root, "bytes.bin"), all);
  await writeFile(join(root, "sub/random.bin"), randomBytes(300_000));
  await writeFile(join(root, "sub/deeper/run.sh"), "#!/bin/sh\necho hi\n");
  await chmod(join(root, "sub/deeper/run.sh"), 0o755);
  await writeFile(join(root, "secret.txt"), "s3cret\n");
  await chmod(join(root, "secret.txt"), 0o600);
  await chmod(join(root, "sub/deeper"), 0o750);
  await symlink("bytes.bin", join(root, "link"));
}

/**
 * A tools cache like `polar tools install` makes: a Node runtime under node/bin
 * (this process's own binary) and a CLI under node_modules/.bin that uses it.
 */
export async function makeToolsDir(): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), "polar-tools-"));
  await mkdir(join(root, "node/bin"), { recursive: true });
  await mkdir(join(root, "node_modules/.bin"), { recursive: true });
  await link(process.execPath, join(root, "node/bin/node")).catch(() => copyFile(process.execPath, join(root, "node/bin/node")));
  await writeFile(join(root, "node_modules/.bin/hello-tool"), "#!/bin/sh\necho \"hello-tool $(node -e 'console.log(6*7)')\"\n");
  await chmod(join(root, "node_modules/.bin/hello-tool"), 0o755);
  await chmod(root, 0o755);
  return root;
}
