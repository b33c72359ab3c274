/**
 * Every request the real CLIs sent (../shared/fixtures/harness-requests, read
 * at test time, never copied) converts, through the dialect its path selects,
 * into a chat request a Qwen3 template renders: system first and only once,
 * every tool result answering a call made before it, tools kept, no billing
 * header, and side calls (title generation, model routers) marked.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import type { ChatRequest, Json } from "../src/proxy/chat-types.ts";
import { detectByBody, detectRoute } from "../src/proxy/detect.ts";
import type { CallContext } from "../src/proxy/dialect.ts";
import { dialectOf } from "../src/proxy/dialects/index.ts";
import { sideKind } from "../src/proxy/side-calls.ts";
import { qwen3Tokenizer } from "../src/tokenizer/qwen3.ts";

const DIR = new URL("../../shared/fixtures/harness-requests/", import.meta.url);

interface Captured {
  file: string;
  seq: number;
  path: string;
  query: string;
  headers: Record<string, string>;
  body: Json;
}

function load(): Captured[] {
  if (!existsSync(DIR)) throw new Error(`captured requests not found at ${DIR.pathname}`);
  return readdirSync(DIR)
    .filter((f) => f.endsWith(".jsonl"))
    .flatMap((file) =>
      readFileSync(new URL(file, DIR), "utf8").split("\n").filter(Boolean).map((line) => {
        const r = JSON.parse(line);
        return { file, seq: r.seq, path: r.path, query: r.query ?? "", headers: r.headers, body: r.body } as Captured;
      }),
    );
}

const captured = load();

function convert(c: Captured): { req: ChatRequest; ctx: CallContext } {
  const route = detectRoute("POST", c.path, c.headers)!;
  const apiType = route.apiType ?? detectByBody(c.body);
  const dialect = dialectOf(apiType);
  const ctx: CallContext = { apiType, path: c.path, query: new URLSearchParams(c.query), modelRequested: "", modelServed: "Qwen/Qwen3-8B" };
  ctx.modelRequested = route.pathModel ?? dialect.modelOf(c.body, ctx);
  return { req: dialect.toChat(structuredClone(c.body), ctx), ctx };
}

function vendorToolCount(body: Json): number {
  const tools = (body.tools as Json[] | undefined) ?? [];
  let n = 0;
  for (const t of tools) {
    if (Array.isArray(t.functionDeclarations)) n += t.functionDeclarations.length;
    else if (t.type === "namespace") n += (t.tools as unknown[]).length;
    else if (t.input_schema || t.type === "function" || t.type === "custom") n++;
  }
  return n;
}

describe("captured CLI requests", () => {
  it("are all there", () => {
    expect(captured.length).toBeGreaterThanOrEqual(20);
    expect(new Set(captured.map((c) => c.file)).size).toBe(12);
  });

  for (const c of captured) {
    it(`${c.file} #${c.seq} converts faithfully`, () => {
      const { req } = convert(c);
      const roles = req.messages.map((m) => m.role);
      expect(roles.filter((r) => r === "system").length).toBeLessThanOrEqual(1);
      if (roles.includes("system")) expect(roles[0]).toBe("system");
      expect(roles).not.toContain("developer");
      expect(JSON.stringify(req)).not.toContain("x-anthropic-billing-header");
      const called = new Set<string>();
      for (const m of req.messages) {
        for (const tc of m.tool_calls ?? []) {
          called.add(tc.id);
          expect(() => JSON.parse(tc.function.arguments)).not.toThrow();
        }
        if (m.role === "tool") expect(called.has(m.tool_call_id!)).toBe(true);
      }
      expect(req.tools?.length ?? 0).toBe(vendorToolCount(c.body));
      // The pivot renders with the real template.
      const text = qwen3Tokenizer().renderChat(req.messages, { tools: req.tools ?? null, chatTemplateKwargs: req.chat_template_kwargs ?? null });
      expect(text.endsWith("<|im_start|>assistant\n")).toBe(true);
    });
  }

  it("marks title generation and the model router as side calls, and nothing else", () => {
    const kinds = captured.map((c) => {
      const { req, ctx } = convert(c);
      return `${c.file}#${c.seq}:${sideKind(req, ctx.modelRequested) ?? "policy"}`;
    });
    const side = kinds.filter((k) => !k.endsWith(":policy"));
    expect(side.sort()).toEqual(
      captured
        .filter((c) => /title generator|Task Routing/i.test(JSON.stringify(c.body).slice(0, 3000)))
        .map((c) => `${c.file}#${c.seq}:${/Task Routing/i.test(JSON.stringify(c.body).slice(0, 3000)) ? "router" : "title"}`)
        .sort(),
    );
    expect(side.length).toBeGreaterThanOrEqual(4);
  });
});
