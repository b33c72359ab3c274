/**
 * The in-sandbox proxy forwarder: inside a sandbox without a network, a
 * listener on 127.0.0.1:FORWARDER_PORT pipes each connection to the model
 * proxy's Unix socket (bound into the sandbox). socat when the image has it,
 * else Node (tools cache or image) running assets/forwarder.mjs.
 */
import { fileURLToPath } from "node:url";
import { FORWARDER_PORT, TOOLS_MOUNT } from "./common.ts";

/** Host path of the Node forwarder script (its directory is bound into sandboxes). */
export const FORWARDER_SCRIPT = fileURLToPath(new URL("./assets/forwarder.mjs", import.meta.url));
/** Where the directory holding forwarder.mjs appears inside container sandboxes. */
export const RUNTIME_ASSETS_MOUNT = "/opt/polar-runtime";

/** POSIX sh that execs a forwarder to `socket`; prints a reason and runs `fallback` when none exists. */
export function forwarderShell(socket: string, fallback: string): string {
  return [
    `if command -v socat >/dev/null 2>&1; then exec socat TCP-LISTEN:${FORWARDER_PORT},bind=127.0.0.1,fork,reuseaddr UNIX-CONNECT:${socket}; fi`,
    `for n in ${TOOLS_MOUNT}/node/bin/node ${TOOLS_MOUNT}/bin/node "$(command -v node)"; do`,
    `  if [ -n "$n" ] && [ -x "$n" ]; then exec "$n" ${RUNTIME_ASSETS_MOUNT}/forwarder.mjs ${FORWARDER_PORT} ${socket}; fi`,
    "done",
    `echo "polar: neither socat nor node in this image: the model proxy is unreachable" >&2`,
    fallback,
  ].join("\n");
}

/** POSIX sh test: something listens on 127.0.0.1:FORWARDER_PORT (read from /proc/net/tcp, no connection made). */
export function listeningTest(): string {
  const hex = `0100007F:${FORWARDER_PORT.toString(16).toUpperCase().padStart(4, "0")}`;
  return `grep -q '${hex} 00000000:0000 0A' /proc/net/tcp`;
}

/** POSIX sh that waits (up to ~5 s) until the forwarder listens, then exits 0 (or 1). */
export function waitListeningShell(): string {
  return `for i in $(seq 1 500); do ${listeningTest()} && exit 0; sleep 0.01; done; exit 1`;
}
