/**
 * Message bodies on NATS: msgpack by default, JSON when the publisher says
 * `content-type: application/json` (so a trainer in any language can talk to
 * us), and validation at the receiving edge with every bad field named.
 */
import { Packr } from "msgpackr";
import type { MsgHdrs } from "@nats-io/transport-node";
import { headers as natsHeaders } from "@nats-io/transport-node";
import type { z } from "zod";
import { ValidationError, type FieldIssue } from "./errors.ts";
import { CONTENT_TYPES, HEADERS, PROTOCOL_VERSION } from "./subjects.ts";

// useRecords:false keeps the msgpack plain maps, readable by any msgpack library.
const packr = new Packr({ useRecords: false, mapsAsObjects: true });
const utf8 = new TextDecoder();
const utf8enc = new TextEncoder();

export type ContentType = (typeof CONTENT_TYPES)[keyof typeof CONTENT_TYPES];

export function contentTypeOf(h: MsgHdrs | undefined): ContentType {
  const ct = h?.get(HEADERS.contentType) ?? "";
  return ct.startsWith(CONTENT_TYPES.json) ? CONTENT_TYPES.json : CONTENT_TYPES.msgpack;
}

export function encode(value: unknown, ct: ContentType = CONTENT_TYPES.msgpack): Uint8Array {
  return ct === CONTENT_TYPES.json ? utf8enc.encode(JSON.stringify(value)) : packr.pack(value);
}

/** Decodes raw bytes; throws ValidationError when the bytes are not what the header says. */
export function decode(data: Uint8Array, ct: ContentType = CONTENT_TYPES.msgpack): unknown {
  if (data.length === 0) return undefined;
  try {
    return ct === CONTENT_TYPES.json ? JSON.parse(utf8.decode(data)) : packr.unpack(data);
  } catch (err) {
    const kind = ct === CONTENT_TYPES.json ? "JSON" : "msgpack";
    throw new ValidationError("message", [{ path: "", message: `body is not valid ${kind}` }], { cause: err });
  }
}

export function makeHeaders(ct: ContentType = CONTENT_TYPES.msgpack, extra: Record<string, string> = {}): MsgHdrs {
  const h = natsHeaders();
  h.set(HEADERS.contentType, ct);
  h.set(HEADERS.protocolVersion, String(PROTOCOL_VERSION));
  for (const [k, v] of Object.entries(extra)) h.set(k, v);
  return h;
}

export function zodIssues(error: z.ZodError): FieldIssue[] {
  return error.issues.map((i) => ({ path: i.path.map(String).join("."), message: i.message }));
}

/** Parses with the schema; on failure throws a ValidationError naming every bad field. */
export function validate<S extends z.ZodType>(schema: S, value: unknown, what: string): z.infer<S> {
  const r = schema.safeParse(value);
  if (!r.success) throw new ValidationError(what, zodIssues(r.error));
  return r.data;
}
