/** A TCP relay in front of a server whose live connections a test can cut (clients then reconnect through it). */
import { createServer, connect, type Socket } from "node:net";

export interface TcpProxy {
  url: string;
  port: number;
  /** Destroys every relayed connection now; new ones are accepted. */
  cut(): number;
  stop(): Promise<void>;
}

export async function startTcpProxy(target: { host: string; port: number }, scheme = "nats"): Promise<TcpProxy> {
  const pairs = new Set<[Socket, Socket]>();
  const server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    const end = () => {
      client.destroy();
      upstream.destroy();
      pairs.delete(pair);
    };
    client.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `${scheme}://127.0.0.1:${port}`,
    port,
    cut() {
      const n = pairs.size;
      for (const [a, b] of pairs) {
        a.destroy();
        b.destroy();
      }
      pairs.clear();
      return n;
    },
    stop: () =>
      new Promise<void>((r) => {
        for (const [a, b] of pairs) {
          a.destroy();
          b.destroy();
        }
        server.close(() => r());
      }),
  };
}
