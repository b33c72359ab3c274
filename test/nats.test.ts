import { existsSync } from "node:fs";
import { Kvm } from "@nats-io/kv";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectNats, openInfra, type Infra } from "../src/nats/infra.ts";
import { kvKeys } from "../src/nats/kv-keys.ts";
import { startNatsServer, type NatsServerHandle } from "../src/nats/launcher.ts";
import { publishDurable, readDurable, request, serveRequests } from "../src/nats/messages.ts";
import { PolarError } from "../src/protocol/errors.ts";
import { STREAMS } from "../src/protocol/subjects.ts";
import { silentLogger } from "../src/util/log.ts";

describe("embedded nats-server and messaging", () => {
  let server: NatsServerHandle;
  let infra: Infra;
  beforeAll(async () => {
    server = await startNatsServer({ maxPayload: 64 * 1024 });
    infra = await openInfra(await connectNats(server.url, "test"));
  });
  afterAll(async () => {
    await infra?.nc.close();
    await server?.stop();
  });

  it("moves a body above the message limit to the object store and reads it back", async () => {
    const big = { traces: Array.from({ length: 4000 }, (_, i) => ({ ids: [i, i + 1, i + 2], text: `trace ${i}`.repeat(4) })) };
    const ack = await publishDurable(infra, "polar.trace.big.s1", big, "big-1");
    const m = await infra.jsm.streams.getMessage(STREAMS.traces, { seq: ack.seq });
    expect(m!.data.length).toBeLessThan(1024); // only the reference travelled
    expect(m!.header.get("polar-blob")).toBe("1");
    expect(await readDurable(infra, m!.data, m!.header)).toEqual(big);
    const dup = await publishDurable(infra, "polar.trace.big.s1", big, "big-1");
    expect(dup.duplicate).toBe(true); // the message id dedupes a re-publish
  });

  it("serves request/reply in msgpack and JSON with typed errors", async () => {
    const sub = serveRequests(infra.nc, "test.echo", async (b) => {
      if ((b as { fail?: boolean }).fail) throw new PolarError("conflict", "nope", { details: { x: 1 } });
      return { echoed: b };
    }, silentLogger());
    expect(await request(infra.nc, "test.echo", { a: 1 })).toEqual({ echoed: { a: 1 } });
    expect(await request(infra.nc, "test.echo", { a: 2 }, { json: true })).toEqual({ echoed: { a: 2 } });
    const err = (await request(infra.nc, "test.echo", { fail: true }, { json: true }).catch((e) => e)) as PolarError;
    expect(err).toBeInstanceOf(PolarError);
    expect([err.code, err.message, err.details]).toEqual(["conflict", "nope", { x: 1 }]);
    await sub.drain();
    const none = (await request(infra.nc, "test.nobody", {}).catch((e) => e)) as PolarError;
    expect(none.code).toBe("unavailable");
  });

  it("lists each KV key at most once while keys are being rewritten, and every key that is not rewritten", async () => {
    const kv = await new Kvm(infra.nc).create("keys_test", { history: 1 });
    const n = 300;
    const key = (i: number) => `g${i % 2}.k${i}`;
    const all = Array.from({ length: n }, (_, i) => key(i));
    for (let i = 0; i < n; i++) await kv.put(key(i), "0");
    // The writer rewrites every 7th key, over and over (as heartbeats and lease renewals do).
    const rewritten = (i: number) => (n - 1 - i) % 7 === 0;
    const steady = all.filter((_, i) => !rewritten(i));
    let writing = true;
    const writer = (async () => {
      for (let round = 1; writing; round++) for (let i = n - 1; i >= 0 && writing; i -= 7) await kv.put(key(i), String(round));
    })();
    try {
      for (let pass = 0; pass < 5; pass++) {
        const keys = await kvKeys(kv);
        expect(new Set(keys).size).toBe(keys.length); // each once (nats.js delivers a rewritten key again)
        expect(keys.filter((k) => !all.includes(k))).toEqual([]);
        expect(steady.filter((k) => !keys.includes(k))).toEqual([]); // nothing that stood still is missed
      }
      const evens = await kvKeys(kv, "g0.>");
      expect(evens.filter((k) => !k.startsWith("g0."))).toEqual([]);
      expect(steady.filter((k) => k.startsWith("g0.") && !evens.includes(k))).toEqual([]);
    } finally {
      writing = false;
      await writer;
    }
    // Once the writes stop, the listing is exact.
    expect((await kvKeys(kv)).sort()).toEqual([...all].sort());
    expect((await kvKeys(kv, "g0.>")).sort()).toEqual(all.filter((k) => k.startsWith("g0.")).sort());
    await kv.destroy();
  });

  it("stops the server and removes its temporary store", async () => {
    const s = await startNatsServer();
    expect(existsSync(s.storeDir)).toBe(true);
    await s.stop();
    expect(await s.closed).not.toBeUndefined();
    expect(existsSync(s.storeDir)).toBe(false);
    await s.stop(); // idempotent
  });
});
