/**
 * Who is at the other end of a loopback TCP connection, from /proc (Linux):
 * the client socket's inode from /proc/net/tcp{,6}, the process trees below
 * a set of root pids, and whether one of those processes holds the inode as
 * an open file descriptor. The socket table is read off the event loop: on a
 * busy host it lists thousands of sockets and costs milliseconds of kernel
 * time; the process tree and its descriptors are a few small synchronous reads.
 */
import { existsSync, readFileSync, readdirSync, readlinkSync } from "node:fs";
import { open, type FileHandle } from "node:fs/promises";

export interface Endpoint {
  address: string;
  port: number;
}

/**
 * The inode of the socket whose local end is `client` and remote end is
 * `server` (both as seen from this network namespace), or undefined when no
 * such socket is listed (another namespace, already closed).
 */
export async function tcpSocketInode(client: Endpoint, server: Endpoint, procRoot = "/proc"): Promise<number | undefined> {
  const v4 = ipv4Of(client.address);
  const files = v4 !== undefined ? ["net/tcp", "net/tcp6"] : ["net/tcp6"];
  const want = [procAddress(client), procAddress(server)];
  const want6 = v4 !== undefined ? [procAddress6Mapped(client), procAddress6Mapped(server)] : want;
  for (const f of files) {
    const [local, remote] = f === "net/tcp6" ? want6 : want;
    if (!local || !remote) continue;
    const line = await scannerOf(`${procRoot}/${f}`).find(`: ${local} ${remote} `);
    if (line) {
      const inode = Number(line.trim().split(/\s+/)[9]);
      return inode > 0 ? inode : undefined;
    }
  }
  return undefined;
}

/** Reads of a socket table so far (each serves every lookup that was waiting when it began). */
export const tableScans = { count: 0 };

const scanners = new Map<string, TableScanner>();
const scannerOf = (path: string): TableScanner => {
  let s = scanners.get(path);
  if (!s) scanners.set(path, (s = new TableScanner(path)));
  return s;
};

/**
 * Lookups in one procfs socket table, coalesced: one read at a time, looking
 * for every needle waiting while it runs. The kernel formats the whole table
 * on every read (a loaded host lists thousands of sockets: milliseconds
 * each), so a burst of new connections costs a few reads, not one each. A
 * needle is answered as soon as its line is read; one asked for during a read
 * joins it, and if that read had already passed its line, the next read
 * finds it (a connection is listed before its lookup is asked for). A needle
 * that a whole read did not find is not listed: undefined.
 */
class TableScanner {
  readonly #waiting = new Map<string, Array<(line: string | undefined) => void>>();
  #reading = false;
  #buf: Buffer | undefined;

  constructor(private readonly path: string) {}

  find(needle: string): Promise<string | undefined> {
    return new Promise((resolve) => {
      const waiting = this.#waiting.get(needle);
      if (waiting) waiting.push(resolve);
      else this.#waiting.set(needle, [resolve]);
      if (!this.#reading) void this.#drain();
    });
  }

  #answer(needle: string, line: string | undefined): void {
    const waiting = this.#waiting.get(needle);
    this.#waiting.delete(needle);
    for (const resolve of waiting ?? []) resolve(line);
  }

  async #drain(): Promise<void> {
    this.#reading = true;
    try {
      while (this.#waiting.size) {
        const atStart = [...this.#waiting.keys()];
        this.#buf ??= Buffer.allocUnsafe(TABLE_CHUNK);
        await scanTable(this.path, this.#buf, this.#waiting, (needle, line) => this.#answer(needle, line));
        // Asked for before this read began and not in it: not listed.
        for (const needle of atStart) if (this.#waiting.has(needle)) this.#answer(needle, undefined);
      }
    } finally {
      this.#reading = false;
    }
  }
}

/** Bytes per read of a socket table: a loaded host's table in one or a few reads. */
const TABLE_CHUNK = 512 * 1024;

/**
 * Reads a procfs table once, in chunks, calling `found` with the first line
 * containing each needle of `wanted` (checked again at every chunk, so
 * needles added meanwhile are looked for in the rest), and stopping once
 * nothing is wanted. A table that cannot be read (no IPv6, no procfs) finds
 * nothing.
 */
async function scanTable(path: string, buf: Buffer, wanted: Map<string, unknown>, found: (needle: string, line: string) => void): Promise<void> {
  let fh: FileHandle;
  try {
    fh = await open(path, "r");
  } catch {
    return;
  }
  tableScans.count++;
  try {
    let carry = "";
    while (wanted.size) {
      const { bytesRead: n } = await fh.read(buf, 0, buf.length, null);
      if (n <= 0) break;
      const text = carry + buf.toString("latin1", 0, n);
      const lastNl = text.lastIndexOf("\n");
      for (const needle of [...wanted.keys()]) {
        const at = text.indexOf(needle);
        if (at >= 0 && at < lastNl) found(needle, text.slice(text.lastIndexOf("\n", at) + 1, text.indexOf("\n", at)));
      }
      carry = text.slice(lastNl + 1); // a partial last line (a needle may straddle the chunks)
    }
  } catch {
    // a read that fails midway: what it did not find counts as not listed
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/**
 * `roots` and every live descendant, roots first, each with its start time
 * (so a cached pid can be told from a later process that reuses it). It walks
 * down from the roots through each thread's `task/<tid>/children` list, so it
 * costs what the tree costs, not what the host runs: a loaded host with
 * thousands of live sessions pays a few reads per lookup, not one per process.
 * On a kernel without those lists (CONFIG_PROC_CHILDREN off) it falls back to
 * reading every process's PPid.
 */
export function processTree(roots: Iterable<number>, procRoot = "/proc"): Map<number, string> {
  if (!hasChildLists(procRoot)) return processTreeByScan(roots, procRoot);
  const out = new Map<number, string>();
  const stack = [...roots];
  while (stack.length) {
    const p = stack.pop()!;
    if (out.has(p)) continue;
    const start = startTime(p, procRoot);
    if (start === undefined) continue; // gone
    out.set(p, start);
    for (const tid of readdirOrEmpty(`${procRoot}/${p}/task`)) {
      for (const c of readOrEmpty(`${procRoot}/${p}/task/${tid}/children`).split(" ")) if (c) stack.push(Number(c));
    }
  }
  return out;
}

/** The same tree found by reading every process's PPid: O(processes on the host); for kernels without child lists. */
export function processTreeByScan(roots: Iterable<number>, procRoot = "/proc"): Map<number, string> {
  const children = new Map<number, number[]>();
  const starts = new Map<number, string>();
  for (const e of readdirOrEmpty(procRoot)) {
    if (!/^\d+$/.test(e)) continue;
    const f = statFields(readOrEmpty(`${procRoot}/${e}/stat`));
    if (!f) continue;
    starts.set(Number(e), f.start);
    const list = children.get(f.ppid);
    if (list) list.push(Number(e));
    else children.set(f.ppid, [Number(e)]);
  }
  const out = new Map<number, string>();
  const stack = [...roots];
  while (stack.length) {
    const p = stack.pop()!;
    const start = starts.get(p);
    if (start === undefined || out.has(p)) continue;
    out.set(p, start);
    stack.push(...(children.get(p) ?? []));
  }
  return out;
}

const childLists = new Map<string, boolean>();

/** Whether this procfs lists each thread's children (asked once per procfs, of this process's own main thread). */
function hasChildLists(procRoot: string): boolean {
  let yes = childLists.get(procRoot);
  if (yes === undefined) {
    yes = existsSync(`${procRoot}/${process.pid}/task/${process.pid}/children`);
    childLists.set(procRoot, yes);
  }
  return yes;
}

/** The start time of a live process (clock ticks since boot), or undefined when it is gone. */
export function startTime(pid: number, procRoot = "/proc"): string | undefined {
  return statFields(readOrEmpty(`${procRoot}/${pid}/stat`))?.start;
}

/** True when one of `pids` holds `socket:[inode]` as an open file descriptor. */
export function holdsSocket(pids: Iterable<number>, inode: number, procRoot = "/proc"): boolean {
  const target = `socket:[${inode}]`;
  for (const pid of pids) {
    const dir = `${procRoot}/${pid}/fd`;
    for (const fd of readdirOrEmpty(dir)) {
      try {
        if (readlinkSync(`${dir}/${fd}`) === target) return true;
      } catch {
        // the descriptor closed (or the process exited) between readdir and readlink: not a holder
      }
    }
  }
  return false;
}

/** PPid and starttime of /proc/<pid>/stat (fields 4 and 22, after the command name, which may hold spaces and parentheses). */
function statFields(stat: string): { ppid: number; start: string } | undefined {
  const end = stat.lastIndexOf(")");
  if (end < 0) return undefined;
  const rest = stat.slice(end + 2).split(" ");
  const ppid = Number(rest[1]);
  return Number.isInteger(ppid) && rest[19] ? { ppid, start: rest[19] } : undefined;
}

/** 127.0.0.1 -> [127,0,0,1]; also `::ffff:127.0.0.1`. */
function ipv4Of(address: string): number[] | undefined {
  const a = address.startsWith("::ffff:") ? address.slice(7) : address;
  const m = /^(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(a);
  return m ? m.slice(1).map(Number) : undefined;
}

const hex = (n: number, w: number): string => n.toString(16).toUpperCase().padStart(w, "0");

/** The kernel's notation: each 32-bit word of the address in host (little-endian) order, then the port. */
function procAddress(e: Endpoint): string | undefined {
  const v4 = ipv4Of(e.address);
  if (v4) return `${v4.map((b) => hex(b, 2)).reverse().join("")}:${hex(e.port, 4)}`;
  const bytes = ipv6Bytes(e.address);
  return bytes ? `${words(bytes)}:${hex(e.port, 4)}` : undefined;
}

/** An IPv4 endpoint as listed in /proc/net/tcp6 when a dual-stack socket carries it (::ffff:a.b.c.d). */
function procAddress6Mapped(e: Endpoint): string | undefined {
  const v4 = ipv4Of(e.address)!;
  return `${words([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ...v4])}:${hex(e.port, 4)}`;
}

function words(bytes: number[]): string {
  let s = "";
  for (let i = 0; i < 16; i += 4) s += bytes.slice(i, i + 4).reverse().map((b) => hex(b, 2)).join("");
  return s;
}

function ipv6Bytes(address: string): number[] | undefined {
  const [head, tail] = address.split("::");
  const parse = (s: string | undefined): number[] => (s ? s.split(":").map((g) => parseInt(g, 16)) : []);
  const h = parse(head);
  const t = address.includes("::") ? parse(tail) : [];
  const groups = address.includes("::") ? [...h, ...new Array(8 - h.length - t.length).fill(0), ...t] : h;
  if (groups.length !== 8 || groups.some((g) => !(g >= 0 && g <= 0xffff))) return undefined;
  return groups.flatMap((g) => [g >> 8, g & 0xff]);
}

function readOrEmpty(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    // the process exited, or procfs is not there: nothing to match
    return "";
  }
}

function readdirOrEmpty(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    // the process exited, or its descriptors are not ours to list: it holds nothing we can see
    return [];
  }
}
