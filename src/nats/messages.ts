/**
 * Publishing and reading bodies on NATS: msgpack (or JSON on request), with
 * payloads above the server's message limit moved to the object store and
 * replaced by a reference; request/reply with typed errors on the wire.
 */
import type { Msg, MsgHdrs, NatsConnection, Subscription } from "@nats-io/transport-node";
import type { JetStreamClient, PubAck } from "@nats-io/jetstream";
import type { ObjectStore } from "@nats-io/obj";
import type { Logger } from "pino";
import { randomUUID } from "node:crypto";
import { CONTENT_TYPES, HEADERS } from "../protocol/subjects.ts";
import { contentTypeOf, decode, encode, makeHeaders, validate, type ContentType } from "../protocol/codec.ts";
import { BlobRef } from "../protocol/schemas.ts";
import { errorFromWire, PolarError, toWireError, type WireError } from "../protocol/errors.ts";

const HEADROOM = 16 * 1024;

export interface BlobContext {
  nc: NatsConnection;
  js: JetStreamClient;
  blobs: ObjectStore;
}

/** Publishes to a stream; a body too large for one message goes to the object store. */
export async function publishDurable(ctx: BlobContext, subject: string, value: unknown, msgId?: string): Promise<PubAck> {
  const body = encode(value);
  const limit = (ctx.nc.info?.max_payload ?? 1024 * 1024) - HEADROOM;
  const extra: Record<string, string> = msgId ? { [HEADERS.msgId]: msgId } : {};
  if (body.length <= limit) return ctx.js.publish(subject, body, { headers: makeHeaders(CONTENT_TYPES.msgpack, extra) });
  const name = `${subject}/${msgId ?? randomUUID()}`;
  await ctx.blobs.putBlob({ name }, body);
  const ref: BlobRef = { blob: name, size: body.length };
  return ctx.js.publish(subject, encode(ref), { headers: makeHeaders(CONTENT_TYPES.msgpack, { ...extra, [HEADERS.blobRef]: "1" }) });
}

/** Decodes a stream message body, fetching it from the object store when it is a reference. */
export async function readDurable(ctx: Pick<BlobContext, "blobs">, data: Uint8Array, headers?: MsgHdrs): Promise<unknown> {
  const ct = contentTypeOf(headers);
  const value = decode(data, ct);
  if (headers?.get(HEADERS.blobRef) !== "1") return value;
  const ref = validate(BlobRef, value, "blob reference");
  const blob = await ctx.blobs.getBlob(ref.blob);
  if (!blob) throw new PolarError("not_found", `blob ${ref.blob} is missing from the object store`);
  return decode(blob, CONTENT_TYPES.msgpack);
}

export type Reply<T> = { ok: true; data: T } | { ok: false; error: WireError };

/**
 * Serves request/reply on a subject (queue group `polar`): bodies decoded by
 * content type, handler errors answered as typed wire errors in the caller's
 * content type. A handler never takes the subscription down.
 */
export function serveRequests(
  nc: NatsConnection,
  subject: string,
  handler: (body: unknown) => Promise<unknown>,
  log: Logger,
): Subscription {
  return nc.subscribe(subject, {
    queue: "polar",
    callback: (err, msg) => {
      if (err) {
        log.error({ err, subject }, "request subscription failed");
        return;
      }
      void answer(msg, handler, log);
    },
  });
}

async function answer(msg: Msg, handler: (body: unknown) => Promise<unknown>, log: Logger): Promise<void> {
  const ct: ContentType = contentTypeOf(msg.headers);
  let reply: Reply<unknown>;
  try {
    reply = { ok: true, data: await handler(decode(msg.data, ct)) };
  } catch (err) {
    if (!(err instanceof PolarError)) log.error({ err, subject: msg.subject }, "request handler failed");
    reply = { ok: false, error: toWireError(err) };
  }
  if (!msg.reply) return;
  try {
    msg.respond(encode(reply, ct), { headers: makeHeaders(ct) });
  } catch (err) {
    log.warn({ err, subject: msg.subject }, "could not send a reply");
  }
}

/** Calls a request/reply endpoint; resolves with the data or rejects with the typed error. */
export async function request<T>(
  nc: NatsConnection,
  subject: string,
  body: unknown,
  opts: { timeoutMs?: number; json?: boolean } = {},
): Promise<T> {
  const ct = opts.json ? CONTENT_TYPES.json : CONTENT_TYPES.msgpack;
  const timeoutError = new PolarError("timeout", `no answer on ${subject} within ${opts.timeoutMs ?? 10_000} ms`);
  let msg: Msg;
  try {
    msg = await nc.request(subject, encode(body, ct), { timeout: opts.timeoutMs ?? 10_000, headers: makeHeaders(ct) });
  } catch (err) {
    const name = (err as Error)?.name ?? "";
    if (/NoResponders/i.test(name) || /no responders/i.test(String(err))) {
      throw new PolarError("unavailable", `nothing serves ${subject} (is the supervisor running?)`, { cause: err });
    }
    if (/Timeout/i.test(name)) throw Object.assign(timeoutError, { cause: err });
    throw err;
  }
  const reply = decode(msg.data, contentTypeOf(msg.headers)) as Reply<T>;
  if (reply && reply.ok === true) return reply.data;
  if (reply && reply.ok === false) throw errorFromWire(reply.error);
  throw new PolarError("internal", `malformed reply on ${subject}`);
}
