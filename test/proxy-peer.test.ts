/**
 * Finding who holds the client end of a loopback TCP connection through /proc,
 * with real processes: a child (and a grandchild under bash) connects to a
 * server here; the proxy's check finds the client socket's inode, and it is
 * held inside the child's process tree and nowhere in an unrelated tree. A
 * process that double-forked out of the tree is not in it.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createServer, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { holdsSocket, processTree, processTreeByScan, startTime, tableScans, tcpSocketInode } from "../src/proxy/peer-proc.ts";

let server: Server;
let port: number;
const accepted: Socket[] = [];
const children: ChildProcess[] = [];

/** A node process that connects to the server and stays connected (until killed). */
const CONNECT = (p: number) => `require("net").connect(${p}, "127.0.0.1", function () { this.write("hi"); }); setInterval(() => {}, 1000);`;

/** Waits for the next accepted connection. */
function nextConnection(): Promise<Socket> {
  const have = accepted.length;
  return new Promise((resolve, reject) => {
    const deadline = setTimeout(() => reject(new Error("no connection within 20 s")), 20_000);
    const poll = setInterval(() => {
      if (accepted.length > have) {
        clearInterval(poll);
        clearTimeout(deadline);
        resolve(accepted[have]);
      }
    }, 10);
  });
}

function inodeOf(sock: Socket): Promise<number | undefined> {
  return tcpSocketInode({ address: sock.remoteAddress!, port: sock.remotePort! }, { address: sock.localAddress!, port: sock.localPort! });
}

beforeAll(async () => {
  server = createServer((s) => accepted.push(s));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  port = (server.address() as { port: number }).port;
});

afterAll(async () => {
  for (const c of children) c.kill("SIGKILL");
  for (const s of accepted) s.destroy();
  await new Promise((r) => server.close(r));
});

describe("peer processes from /proc", () => {
  it("finds the client socket in the connecting process's tree, under bash too, and not in an unrelated tree", async () => {
    const conn = nextConnection();
    const direct = spawn(process.execPath, ["-e", CONNECT(port)], { stdio: "ignore" });
    children.push(direct);
    const inode = await inodeOf(await conn);
    expect(inode).toBeGreaterThan(0);
    expect(holdsSocket(processTree([direct.pid!]).keys(), inode!)).toBe(true);
    expect(holdsSocket([process.pid], inode!)).toBe(false); // this process holds the server end, another inode

    const conn2 = nextConnection();
    const shell = spawn("/bin/bash", ["-c", `${JSON.stringify(process.execPath)} -e '${CONNECT(port)}'; true`], { stdio: "ignore" });
    children.push(shell);
    const inode2 = (await inodeOf(await conn2))!;
    const tree = processTree([shell.pid!]);
    expect(tree.size).toBeGreaterThanOrEqual(2); // bash and its node child
    expect(tree.get(shell.pid!)).toBe(startTime(shell.pid!));
    expect(holdsSocket(tree.keys(), inode2)).toBe(true);
    expect(holdsSocket(processTree([direct.pid!]).keys(), inode2)).toBe(false);
    expect(await inodeOf(await conn)).toBe(inode); // still the first one's
  });

  it("a process that double-forked out of the tree is not in it", async () => {
    const conn = nextConnection();
    // A subshell starts node in the background and exits: node is reparented away from bash, which stays alive.
    const shell = spawn("/bin/bash", ["-c", `(setsid ${JSON.stringify(process.execPath)} -e '${CONNECT(port)}' </dev/null >/dev/null 2>&1 & echo $!); exec sleep 60`], { stdio: ["ignore", "pipe", "ignore"] });
    children.push(shell);
    let out = "";
    shell.stdout!.on("data", (c) => (out += c));
    const inode = (await inodeOf(await conn))!;
    for (const deadline = Date.now() + 10_000; !out.includes("\n") && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 10));
    const orphan = Number(out.trim());
    try {
      expect(inode).toBeGreaterThan(0);
      expect(orphan).toBeGreaterThan(0);
      const tree = processTree([shell.pid!]);
      expect(tree.has(shell.pid!)).toBe(true); // the tree is alive...
      expect(tree.has(orphan)).toBe(false); // ...and the orphan is not in it
      expect(holdsSocket(tree.keys(), inode)).toBe(false);
      expect(holdsSocket([orphan], inode)).toBe(true); // it is the holder, just not in the tree
    } finally {
      process.kill(orphan, "SIGKILL");
    }
  });

  it("walks down from the roots (child lists) to the same tree a scan of every process finds", async () => {
    // bash -> (bash -> sleep, sleep), next to an unrelated bash -> sleep
    const tree = spawn("/bin/bash", ["-c", "(sleep 60; true) & sleep 60 & wait"], { stdio: "ignore" });
    const other = spawn("/bin/bash", ["-c", "sleep 60 & wait"], { stdio: "ignore" });
    children.push(tree, other);
    let walked = new Map<number, string>();
    for (const deadline = Date.now() + 10_000; walked.size < 4 && Date.now() < deadline; ) {
      await new Promise((r) => setTimeout(r, 20));
      walked = processTree([tree.pid!]);
    }
    const scanned = processTreeByScan([tree.pid!]);
    expect(walked.size).toBe(4);
    expect([...walked].sort()).toEqual([...scanned].sort());
    expect(walked.get(tree.pid!)).toBe(startTime(tree.pid!));
    const otherTree = processTree([other.pid!]);
    expect(otherTree.has(other.pid!)).toBe(true);
    for (const pid of otherTree.keys()) expect(walked.has(pid)).toBe(false);
    // gone roots give an empty tree, like the scan
    expect(processTree([2 ** 22 + 7]).size).toBe(0);
    expect(processTreeByScan([2 ** 22 + 7]).size).toBe(0);
  });

  it("a burst of lookups shares reads of the socket table, and each finds its own connection's holder", async () => {
    const n = 12;
    const have = accepted.length;
    const procs = Array.from({ length: n }, () => spawn(process.execPath, ["-e", CONNECT(port)], { stdio: "ignore" }));
    children.push(...procs);
    for (const deadline = Date.now() + 20_000; accepted.length < have + n; ) {
      if (Date.now() > deadline) throw new Error(`only ${accepted.length - have} of ${n} connected`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const socks = accepted.slice(have, have + n);
    const before = tableScans.count;
    const inodes = await Promise.all(socks.map(inodeOf));
    const scans = tableScans.count - before;
    expect(new Set(inodes).size).toBe(n);
    // every connection is held by exactly one of the processes: its own
    for (const inode of inodes) {
      expect(inode).toBeGreaterThan(0);
      expect(procs.filter((p) => holdsSocket([p.pid!], inode!))).toHaveLength(1);
    }
    expect(scans).toBeGreaterThanOrEqual(1);
    expect(scans).toBeLessThanOrEqual(2); // the first read, and one for all that asked during it
  });
});
