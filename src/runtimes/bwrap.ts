/**
 * bubblewrap isolation for the local backend: a minimal root, not the host's.
 * Visible read-only: the system directories needed to run programs (/usr and
 * its /bin, /lib links, a short list of /etc files: no shadow, no keys), the
 * Node installation, polar's own installation and the tools cache; writable:
 * the session directory; private /tmp, /dev and /proc. Homes, other
 * checkouts, /root, /run (the Docker socket), /var and the rest of /etc are
 * not there at all. Private pid/ipc/uts namespaces, every capability
 * dropped, and unless the network is shared a private network namespace whose
 * only way out is the model proxy's Unix socket (a forwarder started inside
 * listens on 127.0.0.1:FORWARDER_PORT).
 */
import { spawnSync } from "node:child_process";
import { existsSync, lstatSync, readlinkSync, realpathSync } from "node:fs";
import { dirname } from "node:path";
import { FORWARDER_PORT } from "./common.ts";
import { FORWARDER_SCRIPT, listeningTest } from "./forwarder.ts";


export interface BwrapOptions {
  bwrap: string;
  sessionDir: string;
  cwd: string;
  /** Share the host network (no forwarder); otherwise a private network namespace. */
  shareNet: boolean;
  /** The proxy's Unix socket; with a private network a forwarder reaches it. */
  proxySocket?: string;
  /** Host directories made visible read-only at the same path (tools cache, …). */
  readOnly?: string[];
  /**
   * Host directories replaced by an empty tmpfs (besides /tmp and the session
   * directory's parent, which holds the other sessions): e.g. the gateway's HOME.
   */
  hide?: string[];
  /** Host socat binary: the forwarder when present (fast), else Node runs forwarder.mjs. */
  socat?: string;
}

export function which(name: string, path = process.env.PATH ?? ""): string | undefined {
  for (const dir of path.split(":")) if (dir && existsSync(`${dir}/${name}`)) return `${dir}/${name}`;
  return undefined;
}

/** Finds bubblewrap on PATH and checks it can create its namespaces here. */
export function probeBwrap(path = process.env.PATH ?? ""): string | undefined {
  const bin = which("bwrap", path);
  if (!bin) return undefined;
  const r = spawnSync(bin, ["--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "--proc", "/proc", "--dev", "/dev", "/bin/true"], { timeout: 10_000, stdio: "ignore" });
  return r.status === 0 ? bin : undefined;
}

/** Never hidden, whatever `hide` says: the sandbox needs them. */
const SYSTEM_DIRS = new Set(["/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/dev", "/proc", "/sys", "/var", "/opt", "/run"]);

/** The system directories of the minimal root (links such as /bin -> usr/bin are recreated as links). */
const ROOT_DIRS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

/** The /etc files programs need (users, name resolution, dynamic linker, certificates); nothing secret. */
const ETC_FILES = [
  "/etc/passwd", "/etc/group", "/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/etc/nsswitch.conf", "/etc/host.conf",
  "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/ssl/certs", "/etc/ca-certificates", "/etc/alternatives",
  "/etc/localtime", "/etc/timezone", "/etc/os-release", "/etc/debian_version", "/etc/mime.types", "/etc/bash.bashrc",
  "/etc/profile", "/etc/inputrc", "/etc/gitconfig", "/etc/protocols", "/etc/services",
];

function rootArgs(): string[] {
  const argv: string[] = [];
  for (const d of ROOT_DIRS) {
    if (!existsSync(d)) continue;
    const st = lstatSync(d);
    if (st.isSymbolicLink()) argv.push("--symlink", readlinkSync(d), d);
    else argv.push("--ro-bind", d, d);
  }
  for (const f of ETC_FILES) argv.push("--ro-bind-try", f, f);
  argv.push("--ro-bind-try", "/sys", "/sys"); // cgroup limits and CPU counts, as the session sees them
  // Node itself when it lives outside /usr (nvm, /opt, a tarball).
  const nodeHome = dirname(dirname(realpathSync(process.execPath)));
  if (!nodeHome.startsWith("/usr")) argv.push("--ro-bind", nodeHome, nodeHome);
  return argv;
}

/** The real path of a bind source (a symlinked tools cache binds its target at the link's path). */
function real(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return p;
  }
}

const probed = new Map<string, string | undefined>();

/** probeBwrap, once per PATH for this process (what the host can do does not change). */
export function probeBwrapCached(path = process.env.PATH ?? ""): string | undefined {
  if (!probed.has(path)) probed.set(path, probeBwrap(path));
  return probed.get(path);
}

/**
 * The bwrap command line. Mount order matters: the read-only root, then empty
 * tmpfs over the `hide` directories (and /tmp), then the read-only binds that
 * must show through them (tools, the proxy socket file alone, the forwarder),
 * then the writable session directory.
 */
export function bwrapArgv(o: BwrapOptions, command: string): string[] {
  const argv = [o.bwrap, "--die-with-parent", "--new-session", "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--cap-drop", "ALL"];
  if (!o.shareNet) argv.push("--unshare-net");
  argv.push(...rootArgs(), "--dev", "/dev", "--proc", "/proc");
  const forward = !o.shareNet && o.proxySocket !== undefined;
  const ro = [...(o.readOnly ?? []), ...(forward ? [o.proxySocket!, dirname(FORWARDER_SCRIPT), dirname(o.socat ?? process.execPath)] : [])];
  const hide = [...new Set(["/tmp", dirname(o.sessionDir), ...(o.hide ?? [])])].filter((d) => d !== "/" && !SYSTEM_DIRS.has(d));
  // Shorter paths first, so a bind inside a hidden directory (or a hidden one inside a bind) shows through.
  const mounts = [...hide.map((p) => ({ p, ro: false })), ...[...new Set(ro)].filter((p) => existsSync(p)).map((p) => ({ p, ro: true }))];
  for (const m of mounts.sort((a, b) => a.p.length - b.p.length || Number(a.ro) - Number(b.ro))) {
    if (m.ro) argv.push("--ro-bind", real(m.p), m.p);
    else argv.push("--tmpfs", m.p);
  }
  argv.push("--bind", o.sessionDir, o.sessionDir, "--chdir", o.cwd, "--");
  if (!forward) return [...argv, "/bin/bash", "-c", command];
  const forwarder = o.socat
    ? `${q(o.socat)} TCP-LISTEN:${FORWARDER_PORT},bind=127.0.0.1,fork,reuseaddr ${q(`UNIX-CONNECT:${o.proxySocket!}`)}`
    : `${q(process.execPath)} ${q(FORWARDER_SCRIPT)} ${FORWARDER_PORT} ${q(o.proxySocket!)}`;
  const script = [
    `${forwarder} </dev/null >/dev/null 2>&1 &`,
    `for _ in $(seq 1 1000); do ${listeningTest()} && break; sleep 0.005; done`,
    `exec /bin/bash -c "$1"`,
  ].join("\n");
  return [...argv, "/bin/bash", "-c", script, "polar-sandbox", command];
}

function q(s: string): string {
  return `'${s.replaceAll("'", `'"'"'`)}'`;
}
