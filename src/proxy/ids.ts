/** Vendor-style ids and small value helpers shared by the dialects. */
import { createHash, randomBytes } from "node:crypto";
import type { Json } from "./chat-types.ts";
import { isObject } from "./chat-types.ts";

/** `<prefix><n hex digits>` from fresh random bytes. */
export function hexId(prefix: string, hexDigits = 24): string {
  return prefix + randomBytes(Math.ceil(hexDigits / 2)).toString("hex").slice(0, hexDigits);
}

/** Tool-call arguments (a JSON string) as an object; `{}` when empty or not an object. */
export function parseArguments(args: string | undefined): Json {
  if (!args) return {};
  try {
    const v = JSON.parse(args) as unknown;
    return isObject(v) ? v : {};
  } catch {
    return {};
  }
}

/** A stable opaque signature for a reasoning text (clients echo it back; nothing checks it). */
export function reasoningSignature(text: string): string {
  return "sg_polar_" + createHash("sha256").update(text).digest("base64url");
}

export function encodeReasoning(text: string): string {
  return "polar:" + Buffer.from(text, "utf8").toString("base64url");
}

/** The text of an `encodeReasoning` value, or undefined for any other (vendor-encrypted) value. */
export function decodeReasoning(v: unknown): string | undefined {
  if (typeof v !== "string" || !v.startsWith("polar:")) return undefined;
  return Buffer.from(v.slice(6), "base64url").toString("utf8");
}

/** Prompt tokens not served from cache, and the cached ones, from an OpenAI usage. */
export function splitCached(usage: Json | undefined): { fresh: number; cached: number } {
  const prompt = typeof usage?.prompt_tokens === "number" ? usage.prompt_tokens : 0;
  const details = isObject(usage?.prompt_tokens_details) ? usage.prompt_tokens_details : undefined;
  const cached = typeof details?.cached_tokens === "number" ? details.cached_tokens : 0;
  return { fresh: Math.max(0, prompt - cached), cached };
}
