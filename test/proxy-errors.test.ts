import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CRED, CRED_DONE, startStack, type Stack } from "./proxy-setup.ts";

describe("proxy refusals in the OpenAI error format", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack(
      {
        reply: (body) => {
          const text = JSON.stringify(body.messages);
          if (text.includes("TOO-LONG")) {
            return { status: 400, body: { object: "error", message: "This model's maximum context length is 40960 tokens. However, you requested 50000 tokens.", type: "BadRequestError", code: 400 } };
          }
          if (text.includes("ENGINE-500")) return { status: 500, body: { error: { message: "engine exploded" } } };
          return { content: "fine" };
        },
      },
      { maxBodyBytes: 64 * 1024 },
    );
  });
  afterAll(() => stack.stop());

  const chat = (init: { headers?: Record<string, string>; body?: string | Buffer; path?: string } = {}) =>
    fetch(`${stack.proxy.url}${init.path ?? "/v1/chat/completions"}`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${CRED}`, ...init.headers },
      body: init.body ?? JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
    });

  async function expectRefused(res: Response, status: number, type: string, code?: string) {
    expect(res.status).toBe(status);
    const body = (await res.json()) as any;
    expect(body.error.type).toBe(type);
    expect(typeof body.error.message).toBe("string");
    if (code) expect(body.error.code).toBe(code);
    return body;
  }

  it("serves /health", async () => {
    const res = await fetch(`${stack.proxy.url}/health`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: "ok" });
  });

  it("401 without a credential and with an unknown one; 403 for a session that is not running", async () => {
    const before = stack.records.length;
    const missing = await chat({ headers: { authorization: "" } });
    expect(missing.headers.get("www-authenticate")).toBe("Bearer");
    await expectRefused(missing, 401, "authentication_error", "missing_session_credential");
    await expectRefused(await chat({ headers: { authorization: "Bearer nope" } }), 401, "authentication_error", "invalid_session_credential");
    await expectRefused(await chat({ headers: { authorization: `Bearer ${CRED_DONE}` } }), 403, "permission_error", "inactive_session_credential");
    expect(stack.records.length).toBe(before);
  });

  it("takes the credential from the /s/<credential>/ path form", async () => {
    const res = await chat({ path: `/s/${CRED}/v1/chat/completions`, headers: { authorization: "Bearer placeholder" } });
    expect(res.status).toBe(200);
    expect(((await res.json()) as any).choices[0].message.content).toBe("fine");
    expect(stack.records.at(-1)!.sessionId).toBe("sess-1");
  });

  it("refuses invalid JSON, a wrong shape, an oversized body and a non-JSON content type; nothing recorded", async () => {
    const before = stack.records.length;
    await expectRefused(await chat({ body: "{not json" }), 400, "invalid_request_error");
    const shape = await expectRefused(await chat({ body: JSON.stringify({ model: "m", messages: "hello" }) }), 400, "invalid_request_error");
    expect(shape.error.message).toContain("messages");
    await expectRefused(await chat({ body: JSON.stringify({ model: "m", messages: [{ role: "wizard", content: "x" }] }) }), 400, "invalid_request_error");
    const big = JSON.stringify({ model: "m", messages: [{ role: "user", content: "x".repeat(200 * 1024) }] });
    await expectRefused(await chat({ body: big }), 413, "invalid_request_error");
    await expectRefused(await chat({ headers: { "content-type": "multipart/form-data; boundary=x" } }), 415, "invalid_request_error");
    expect(stack.records.length).toBe(before);
    expect(stack.engine.requests.some((r) => JSON.stringify(r).includes("x".repeat(1000)))).toBe(false);
    // Still alive.
    expect((await chat()).status).toBe(200);
  });

  it("maps a context-length refusal of the engine to context_length_exceeded and passes other statuses through", async () => {
    const before = stack.records.length;
    const body = JSON.stringify({ model: "m", messages: [{ role: "user", content: "TOO-LONG" }] });
    const e = await expectRefused(await chat({ body }), 400, "invalid_request_error", "context_length_exceeded");
    expect(e.error.param).toBe("messages");
    expect(e.error.message).toContain("maximum context length");
    const body500 = JSON.stringify({ model: "m", messages: [{ role: "user", content: "ENGINE-500" }] });
    await expectRefused(await chat({ body: body500 }), 500, "server_error");
    expect(stack.records.length).toBe(before);
  });

  it("answers 5xx when the record cannot be stored, and stores nothing", async () => {
    const before = stack.records.length;
    stack.failNextStore();
    await expectRefused(await chat(), 500, "server_error");
    expect(stack.records.length).toBe(before);
    expect((await chat()).status).toBe(200);
  });

  it("answers 502 when no upstream is reachable", async () => {
    const dead = await startStack({}, { upstreams: ["http://127.0.0.1:9"] });
    try {
      const res = await fetch(`${dead.proxy.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${CRED}` },
        body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
      });
      await expectRefused(res, 502, "server_error");
      expect(dead.records.length).toBe(0);
    } finally {
      await dead.stop();
    }
  });
});
