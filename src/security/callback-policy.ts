/**
 * Where a task's `callback_url` may point. Only http(s); hosts on the
 * allow-list when one is configured; never a link-local address (cloud
 * metadata) nor this host's NATS or API port unless allowed. Checked at
 * submit on the URL as written, and again before every delivery on the
 * addresses the name resolves to and on every redirect target.
 */
import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { networkInterfaces } from "node:os";
import { PolarError } from "../protocol/errors.ts";

export interface CallbackPolicy {
  /** Hosts (names or addresses, optionally `host:port`) allowed; empty: any host not refused below. */
  allowHosts: readonly string[];
  /** Ports of this host that callbacks may never reach (the NATS and API ports), unless the host is allowed. */
  localPorts: readonly number[];
  /** Allow link-local addresses (169.254.0.0/16, fe80::/10). Default false. */
  allowLinkLocal?: boolean;
}

export const DEFAULT_CALLBACK_POLICY: CallbackPolicy = { allowHosts: [], localPorts: [] };

function refuse(url: string, why: string): PolarError {
  return new PolarError("forbidden", `callback_url ${url} is refused: ${why}`, { details: { reason: "callback_refused", url } });
}

export function bareHost(hostname: string): string {
  return hostname.replace(/^\[|\]$/g, "").toLowerCase();
}

function portOf(u: URL): number {
  return u.port ? Number(u.port) : u.protocol === "https:" ? 443 : 80;
}

function allowed(policy: CallbackPolicy, host: string, port: number): boolean {
  return policy.allowHosts.some((h) => {
    const m = /^\[?([^\]]*?)\]?(?::(\d+))?$/.exec(h.toLowerCase());
    if (!m) return false;
    return m[1] === host && (m[2] === undefined || Number(m[2]) === port);
  });
}

export function isLinkLocal(addr: string): boolean {
  const a = addr.toLowerCase().replace(/^::ffff:/, "");
  if (isIP(a) === 4) return a.startsWith("169.254.");
  return /^fe[89ab][0-9a-f]:/.test(a);
}

/** Addresses of this machine: loopback, any-address, every interface. */
export function isThisHost(addr: string): boolean {
  const a = addr.toLowerCase().replace(/^::ffff:/, "");
  if (a === "localhost" || a === "0.0.0.0" || a === "::" || a === "::1" || a.startsWith("127.")) return true;
  for (const list of Object.values(networkInterfaces())) {
    for (const i of list ?? []) if (i.address.toLowerCase() === a) return true;
  }
  return false;
}

/** Checks the URL as written (scheme, literal addresses, allow-list); throws `validation`/`forbidden`. */
export function checkCallbackUrl(raw: string, policy: CallbackPolicy): URL {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new PolarError("validation", `callback_url ${raw} is not a URL`, { details: { reason: "callback_refused", url: raw } });
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") throw refuse(raw, `scheme ${u.protocol} is not http or https`);
  if (u.username || u.password) throw refuse(raw, "credentials in the URL are not allowed");
  const host = bareHost(u.hostname);
  const port = portOf(u);
  if (allowed(policy, host, port)) return u;
  if (policy.allowHosts.length) throw refuse(raw, `host ${host} is not on the callback allow-list`);
  checkAddress(raw, host, port, policy);
  return u;
}

function checkAddress(raw: string, addr: string, port: number, policy: CallbackPolicy): void {
  if (!policy.allowLinkLocal && isLinkLocal(addr)) throw refuse(raw, `${addr} is a link-local address`);
  if (policy.localPorts.includes(port) && isThisHost(addr)) throw refuse(raw, `port ${port} of this host is a polar service port`);
}

/** The full check before a delivery: the URL, then every address its host resolves to. */
export async function checkCallbackTarget(raw: string, policy: CallbackPolicy): Promise<URL> {
  const u = checkCallbackUrl(raw, policy);
  const host = bareHost(u.hostname);
  if (allowed(policy, host, portOf(u))) return u;
  if (isIP(host)) return u;
  let addrs: { address: string }[];
  try {
    addrs = await lookup(host, { all: true });
  } catch (err) {
    throw new PolarError("upstream_unavailable", `callback host ${host} does not resolve`, { cause: err });
  }
  for (const a of addrs) checkAddress(raw, a.address, portOf(u), policy);
  return u;
}
