/**
 * Credentials bound to their sandbox: a request is admitted only if the
 * connection it came on belongs to the credential's session. A connection on
 * a session's own Unix socket is tagged with that session; a loopback TCP
 * connection belongs to whichever process holds its client socket (found
 * through /proc). The verdict is kept per connection, so a keep-alive client
 * pays the lookup once.
 */
import type { Socket } from "node:net";
import { holdsSocket, processTree, startTime, tcpSocketInode } from "./peer-proc.ts";
import { proxyError } from "./errors.ts";
import type { PeerBinding, PeerDirectory, ProxySession } from "./types.ts";

const tags = new WeakMap<Socket, string>();
/** The last verdict on a connection, for one session attempt (`<session id>#<attempt>`). */
const verdicts = new WeakMap<Socket, { key: string; ok: boolean }>();
/** Processes last seen in a binding's trees (pid -> start time): checked first, before walking /proc again. */
const members = new WeakMap<PeerBinding, Map<number, string>>();

/** Marks a connection accepted on `sessionId`'s own socket. */
export function tagConnection(socket: Socket, sessionId: string): void {
  tags.set(socket, sessionId);
}

/**
 * Resolves when the connection may use `session`'s credential; rejects with a
 * 403 (`credential_bound_elsewhere`) otherwise. A connection on some
 * session's socket may use only that session's credential, whatever the
 * binding; an unbound session's credential works from anywhere else.
 */
export async function admitPeer(peers: PeerDirectory | undefined, socket: Socket, session: ProxySession): Promise<void> {
  if (!peers) return;
  const cached = verdicts.get(socket);
  const key = `${session.sessionId}#${session.attempt}`;
  const ok = cached?.key === key ? cached.ok : await decide(peers, socket, session);
  if (cached?.key !== key) verdicts.set(socket, { key, ok });
  if (!ok) {
    throw proxyError("forbidden", "this session credential belongs to another sandbox: it is accepted only from its own session's connection", {
      reason: "credential_bound_elsewhere",
    });
  }
}

async function decide(peers: PeerDirectory, socket: Socket, session: ProxySession): Promise<boolean> {
  const { sessionId } = session;
  const tag = tags.get(socket);
  const binding = peers.bindingOf(session);
  if (!binding) return tag === undefined || tag === sessionId;
  if (binding.via === "socket") return tag === sessionId;
  const { remoteAddress, remotePort, localAddress, localPort } = socket;
  if (tag !== undefined || !remoteAddress || !remotePort || !localAddress || !localPort) return false;
  const inode = await tcpSocketInode({ address: remoteAddress, port: remotePort }, { address: localAddress, port: localPort });
  if (inode === undefined) return false;
  // Fast path: a process already known to be in the tree (and not a later one reusing its pid) holds the socket.
  const known = members.get(binding);
  if (known && holdsSocket([...known].filter(([pid, start]) => startTime(pid) === start).map(([pid]) => pid), inode)) return true;
  const tree = processTree(await binding.roots());
  members.set(binding, tree);
  return holdsSocket(tree.keys(), inode);
}
