/** The upstream pool: least-outstanding balancing, failover on refused connections, timeouts; and the Unix socket listener. */
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startFakeEngine, type FakeEngine } from "./helpers/fake-engine.ts";
import { CRED, startStack, type Stack } from "./proxy-setup.ts";

const chatBody = JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] });
const post = (url: string, headers: Record<string, string> = {}, body = chatBody, path = "/v1/chat/completions") =>
  fetch(url + path, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${CRED}`, ...headers }, body });

describe("upstream pool", () => {
  const cleanup: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  it("sends most calls to the upstream with fewer outstanding requests", async () => {
    const slow = await startFakeEngine({ flavor: "vllm", delayMs: 150 });
    cleanup.push(() => slow.stop());
    const stack = await startStack({}, {});
    cleanup.push(() => stack.stop());
    const fast = stack.engine;
    const dual = await startStack({}, { upstreams: [slow.url, fast.url] });
    cleanup.push(() => dual.stop());
    const res = await Promise.all(Array.from({ length: 40 }, async (_, i) => {
      await new Promise((r) => setTimeout(r, i * 5));
      return post(dual.proxy.url);
    }));
    expect(res.every((r) => r.status === 200)).toBe(true);
    const toSlow = slow.requests.length;
    const toFast = fast.requests.length;
    expect(toSlow + toFast).toBe(40);
    expect(toFast).toBeGreaterThan(toSlow * 2);
    expect(dual.records.length).toBe(40);
  });

  it("moves on to the next upstream when one refuses connections", async () => {
    const stack = await startStack({}, {});
    cleanup.push(() => stack.stop());
    const live = stack.engine;
    const dual = await startStack({}, { upstreams: ["http://127.0.0.1:9", live.url] });
    cleanup.push(() => dual.stop());
    for (let i = 0; i < 4; i++) expect((await post(dual.proxy.url)).status).toBe(200);
    expect(live.requests.length).toBe(4);
  });

  it("answers a slow upstream with a timeout in the client's dialect, records nothing", async () => {
    const stack: Stack = await startStack({ delayMs: 1000 }, { upstreamTimeoutMs: 100 });
    cleanup.push(() => stack.stop());
    const slow: FakeEngine = stack.engine;
    const openai = await post(stack.proxy.url);
    expect(openai.status).toBe(504);
    expect(((await openai.json()) as any).error.type).toBe("timeout_error");
    const gem = await post(stack.proxy.url, { "x-goog-api-key": CRED }, JSON.stringify({ contents: [{ role: "user", parts: [{ text: "hi" }] }] }), "/v1beta/models/g:generateContent");
    expect(gem.status).toBe(504);
    expect(((await gem.json()) as any).error.status).toBe("DEADLINE_EXCEEDED");
    const ant = await post(stack.proxy.url, { "anthropic-version": "2023-06-01" }, JSON.stringify({ model: "c", max_tokens: 5, messages: [{ role: "user", content: "hi" }] }), "/v1/messages");
    expect(ant.status).toBe(504);
    expect(((await ant.json()) as any).error.type).toBe("timeout_error");
    expect(stack.records.length).toBe(0);
    expect(slow.requests.length).toBe(3);
    expect((await fetch(`${stack.proxy.url}/health`)).status).toBe(200);
  });

  it("also listens on a Unix socket", async () => {
    const socketPath = join(tmpdir(), `polar-proxy-${process.pid}-${Date.now()}.sock`);
    const stack = await startStack({}, { socketPath });
    cleanup.push(() => stack.stop());
    const text = await new Promise<string>((resolve, reject) => {
      const req = request({ socketPath, path: "/v1/chat/completions", method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${CRED}` } }, (res) => {
        let s = "";
        res.on("data", (c) => (s += c));
        res.on("end", () => resolve(s));
      });
      req.on("error", reject);
      req.end(chatBody);
    });
    expect(JSON.parse(text).choices[0].message.content).toBe("Hello from the engine.");
    expect(stack.records.length).toBe(1);
  });
});
