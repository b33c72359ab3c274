/** Refusals in every vendor's own format, side calls, model listings, per-session served models, encoded bodies. */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { LISTEN_BACKLOG } from "../src/proxy/server.ts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CRED, startStack, type Stack } from "./proxy-setup.ts";

describe("proxy edges", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack(
      {
        reply: (body) =>
          JSON.stringify(body.messages).includes("TOO-LONG")
            ? { status: 400, body: { object: "error", message: "This model's maximum context length is 40960 tokens. However, you requested 51234 tokens.", type: "BadRequestError", code: 400 } }
            : { content: "A short title" },
      },
      { maxBodyBytes: 32 * 1024 },
    );
    stack.sessions.set("cred-other-model", { sessionId: "sess-3", taskId: "task-2", attempt: 1, metadata: {}, active: true, modelServed: "Qwen/Qwen3.5-4B" });
  });
  afterAll(() => stack.stop());

  const send = (path: string, body: string | Buffer, headers: Record<string, string> = {}) =>
    fetch(stack.proxy.url + path, { method: "POST", headers: { "content-type": "application/json", "x-api-key": CRED, ...headers }, body });

  it("listens with a backlog of LISTEN_BACKLOG, so a burst of new connections queues instead of being dropped", () => {
    // ss shows a listening socket's backlog in Send-Q; the kernel caps it at net.core.somaxconn
    const line = execFileSync("ss", ["-ltnH", `sport = :${stack.proxy.port}`], { encoding: "utf8" }).trim();
    const somaxconn = Number(readFileSync("/proc/sys/net/core/somaxconn", "utf8"));
    expect(line.split(/\s+/)[2]).toBe(String(Math.min(LISTEN_BACKLOG, somaxconn)));
    expect(Math.min(LISTEN_BACKLOG, somaxconn)).toBeGreaterThan(511); // more than Node's default
  });

  it("refuses bad input in Anthropic's format", async () => {
    const before = stack.records.length;
    const big = JSON.stringify({ model: "c", max_tokens: 5, messages: [{ role: "user", content: "x".repeat(64 * 1024) }] });
    const r413 = await send("/v1/messages", big, { "anthropic-version": "2023-06-01" });
    expect(r413.status).toBe(413);
    expect(await r413.json()).toMatchObject({ type: "error", error: { type: "request_too_large" } });
    const r400 = await send("/v1/messages", "{oops", { "anthropic-version": "2023-06-01" });
    expect(r400.status).toBe(400);
    expect(await r400.json()).toMatchObject({ type: "error", error: { type: "invalid_request_error" } });
    const r415 = await send("/v1/messages", "a=b", { "content-type": "application/x-www-form-urlencoded" });
    expect(r415.status).toBe(415);
    expect(await r415.json()).toMatchObject({ type: "error", error: { type: "invalid_request_error" } });
    expect(stack.records.length).toBe(before);
  });

  it("refuses bad input in Google's and the Responses format", async () => {
    const g = await send("/v1beta/models/g:generateContent", "[1,2]");
    expect(g.status).toBe(400);
    expect(await g.json()).toMatchObject({ error: { code: 400, status: "INVALID_ARGUMENT" } });
    const g2 = await send("/v1beta/models/g:streamGenerateContent?alt=sse", JSON.stringify({ contents: "hello" }));
    expect(g2.status).toBe(400);
    expect(((await g2.json()) as any).error.message).toContain("contents");
    const r = await send("/v1/responses", JSON.stringify({ model: "m", input: [{ type: "message", content: "no role" }] }));
    expect(r.status).toBe(400);
    expect(await r.json()).toMatchObject({ error: { type: "invalid_request_error" } });
  });

  it("says a context overflow the way each client recognises it", async () => {
    const msg = [{ role: "user", content: "TOO-LONG" }];
    const a = await send("/v1/messages", JSON.stringify({ model: "c", max_tokens: 5, messages: msg }));
    expect(a.status).toBe(400);
    expect(((await a.json()) as any).error.message).toBe("prompt is too long: 51234 tokens > 40960 maximum");
    const g = await send("/v1beta/models/g:generateContent", JSON.stringify({ contents: [{ role: "user", parts: [{ text: "TOO-LONG" }] }] }));
    expect(((await g.json()) as any).error).toMatchObject({ status: "INVALID_ARGUMENT", message: "The input token count (51234) exceeds the maximum number of tokens allowed (40960)." });
    const r = await send("/v1/responses", JSON.stringify({ model: "m", input: "TOO-LONG" }));
    expect(((await r.json()) as any).error).toMatchObject({ code: "context_length_exceeded", type: "invalid_request_error" });
  });

  it("records title generation as a side call", async () => {
    const res = await send("/v1/chat/completions", JSON.stringify({ model: "m", messages: [{ role: "system", content: "You are a title generator. Output only a title." }, { role: "user", content: "Fix the bug" }] }));
    expect(res.status).toBe(200);
    expect(stack.records.at(-1)!.record.metadata).toMatchObject({ completion_role: "side", side_kind: "title" });
    await send("/v1/chat/completions", JSON.stringify({ model: "m", messages: [{ role: "user", content: "Fix the bug" }] }));
    expect(stack.records.at(-1)!.record.metadata).toMatchObject({ completion_role: "policy" });
    expect(stack.records.at(-1)!.record.metadata.side_kind).toBeUndefined();
  });

  it("uses the session's served model and orders records by arrival", async () => {
    await send("/v1/chat/completions", JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }), { "x-api-key": "cred-other-model" });
    const rec = stack.records.at(-1)!;
    expect(rec.sessionId).toBe("sess-3");
    expect(rec.record.request.model).toBe("Qwen/Qwen3.5-4B");
    expect(rec.record.request.chat_template_kwargs).toEqual({ enable_thinking: false });
    expect(stack.engine.requests.at(-1)!.model).toBe("Qwen/Qwen3.5-4B");
    const seqs = stack.records.map((r) => r.record.seq!);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(new Set(seqs).size).toBe(seqs.length);
  });

  it("accepts gzip-encoded bodies", async () => {
    const body = gzipSync(Buffer.from(JSON.stringify({ model: "m", messages: [{ role: "user", content: "zipped" }] })));
    const res = await send("/v1/chat/completions", body, { "content-encoding": "gzip" });
    expect(res.status).toBe(200);
    expect(JSON.stringify(stack.records.at(-1)!.record.original_request)).toContain("zipped");
    const bomb = gzipSync(Buffer.alloc(10 * 1024 * 1024, 32));
    expect((await send("/v1/chat/completions", bomb, { "content-encoding": "gzip" })).status).toBe(413);
  });

  it("lists models in each vendor's shape", async () => {
    const get = (path: string, headers: Record<string, string> = {}) => fetch(stack.proxy.url + path, { headers: { "x-api-key": CRED, ...headers } }).then((r) => r.json() as Promise<any>);
    expect(await get("/v1/models")).toMatchObject({ object: "list", data: [{ id: "Qwen/Qwen3-8B", object: "model" }] });
    expect(await get("/v1/models", { "anthropic-version": "2023-06-01" })).toMatchObject({ data: [{ type: "model", id: "Qwen/Qwen3-8B" }], has_more: false });
    expect(await get("/v1beta/models")).toMatchObject({ models: [{ name: "models/Qwen/Qwen3-8B" }] });
    expect(await get("/v1beta/models/gemini-x")).toMatchObject({ name: "models/gemini-x" });
    expect((await fetch(stack.proxy.url + "/v1/models")).status).toBe(401);
  });
});

describe("a session that stops while the engine works", () => {
  it("gets 403 and no record", async () => {
    const stack = await startStack({ delayMs: 200 });
    try {
      const pending = fetch(`${stack.proxy.url}/v1/chat/completions`, {
        method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${CRED}` },
        body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
      });
      // The engine has the call (and answers 200 ms later): the session stops meanwhile.
      for (const deadline = Date.now() + 5000; stack.engine.requests.length < 1; ) {
        if (Date.now() > deadline) throw new Error("the call never reached the engine");
        await new Promise((r) => setTimeout(r, 5));
      }
      stack.sessions.set(CRED, { ...stack.sessions.get(CRED)!, active: false });
      const res = await pending;
      expect(res.status).toBe(403);
      expect(((await res.json()) as any).error.code).toBe("inactive_session_credential");
      expect(stack.records.length).toBe(0);
      expect(stack.engine.requests.length).toBe(1);
    } finally {
      await stack.stop();
    }
  });
});
