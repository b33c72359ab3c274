/**
 * Bearer tokens for the HTTP task API. A `trainer` token may do everything
 * the API offers; an `observer` token only reads (GET). Without tokens the
 * API may listen on loopback only. Refusals are 401 (no or unknown token) and
 * 403 (a token whose role may not do this), in the API's error format.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { PolarError } from "../protocol/errors.ts";

export interface ApiTokens {
  trainer?: readonly string[];
  observer?: readonly string[];
}

export function hasTokens(t: ApiTokens | undefined): boolean {
  return !!(t?.trainer?.length || t?.observer?.length);
}

export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  return h === "localhost" || h === "::1" || h.startsWith("127.");
}

/** Refuses to serve a non-loopback API without tokens. */
export function assertApiExposure(host: string, tokens: ApiTokens | undefined): void {
  if (isLoopback(host) || hasTokens(tokens)) return;
  throw new PolarError(
    "validation",
    `the HTTP API would listen on ${host}, which is not loopback, without a bearer token: set security.api_tokens (or POLAR_API_TOKEN), or listen on 127.0.0.1`,
  );
}

const digest = (s: string) => createHash("sha256").update(s).digest();

function matches(token: string, list: readonly string[] | undefined): boolean {
  const d = digest(token);
  let hit = false;
  for (const t of list ?? []) hit = timingSafeEqual(d, digest(t)) || hit; // no early exit
  return hit;
}

/** Throws `unauthorized`/`forbidden` unless the request may proceed. No tokens configured: everything passes. */
export function authorizeRequest(req: IncomingMessage, tokens: ApiTokens | undefined): void {
  if (!hasTokens(tokens)) return;
  const m = /^\s*Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? "");
  if (!m) throw new PolarError("unauthorized", "this API requires a bearer token (Authorization: Bearer <token>)");
  const token = m[1];
  if (matches(token, tokens!.trainer)) return;
  if (matches(token, tokens!.observer)) {
    if (req.method === "GET" || req.method === "HEAD") return;
    throw new PolarError("forbidden", `an observer token may only read; ${req.method} is not allowed`);
  }
  throw new PolarError("unauthorized", "unknown bearer token");
}

/** POLAR_API_TOKEN (trainer) and POLAR_API_OBSERVER_TOKEN from the environment, merged into `tokens`. */
export function apiTokensWithEnv(tokens: ApiTokens | undefined, env: NodeJS.ProcessEnv = process.env): ApiTokens | undefined {
  const trainer = [...(tokens?.trainer ?? []), ...(env.POLAR_API_TOKEN ? [env.POLAR_API_TOKEN] : [])];
  const observer = [...(tokens?.observer ?? []), ...(env.POLAR_API_OBSERVER_TOKEN ? [env.POLAR_API_OBSERVER_TOKEN] : [])];
  return trainer.length || observer.length ? { trainer, observer } : undefined;
}
