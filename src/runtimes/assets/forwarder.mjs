// In-sandbox TCP -> Unix socket forwarder (plain Node, no dependencies).
// Usage: node forwarder.mjs <port> <unix socket path> [ready file]
// Listens on 127.0.0.1:<port> inside the sandbox's network namespace and pipes
// every connection to the model proxy's Unix socket mounted into the sandbox.
import net from "node:net";
import { writeFileSync } from "node:fs";

const [port, socketPath, readyFile] = process.argv.slice(2);
const server = net.createServer((client) => {
  const upstream = net.connect(socketPath);
  client.pipe(upstream).pipe(client);
  const close = () => { client.destroy(); upstream.destroy(); };
  client.on("error", close);
  upstream.on("error", close);
});
server.listen(Number(port), "127.0.0.1", () => {
  if (readyFile) writeFileSync(readyFile, "ready\n");
});
process.on("SIGTERM", () => process.exit(0));
