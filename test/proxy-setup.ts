/** A real proxy in front of a real engine-shaped upstream, with an in-memory session directory and sink. */
import type { CompletionRecord } from "../src/protocol/schemas.ts";
import { startProxy } from "../src/proxy/index.ts";
import type { ProxyHandle, ProxyOptions, ProxySession } from "../src/proxy/index.ts";
import { startFakeEngine, type FakeEngine, type FakeEngineOptions } from "./helpers/fake-engine.ts";
import { silentLogger } from "../src/util/log.ts";

export interface Stack {
  proxy: ProxyHandle;
  engine: FakeEngine;
  sessions: Map<string, ProxySession>;
  records: { sessionId: string; record: CompletionRecord }[];
  /** Make the sink reject the next store. */
  failNextStore(): void;
  stop(): Promise<void>;
}

export const CRED = "cred-live-0001";
export const CRED_DONE = "cred-done-0002";

export async function startStack(engineOpts: Partial<FakeEngineOptions> = {}, proxyOpts: Partial<ProxyOptions> = {}): Promise<Stack> {
  const flavor = engineOpts.flavor ?? proxyOpts.flavor ?? "vllm";
  const engine = await startFakeEngine({ ...engineOpts, flavor });
  const sessions = new Map<string, ProxySession>([
    [CRED, { sessionId: "sess-1", taskId: "task-1", attempt: 2, metadata: { sample_index: 3 }, active: true }],
    [CRED_DONE, { sessionId: "sess-2", taskId: "task-1", attempt: 1, metadata: {}, active: false }],
  ]);
  const records: Stack["records"] = [];
  let failNext = false;
  const proxy = await startProxy(
    {
      sessions: { lookup: (c) => sessions.get(c) },
      sink: {
        record: async (sessionId, record) => {
          if (failNext) {
            failNext = false;
            throw new Error("store down");
          }
          records.push({ sessionId, record });
        },
      },
      log: silentLogger(),
    },
    {
      host: "127.0.0.1", port: 0, upstreams: [engine.url], flavor, modelServed: "Qwen/Qwen3-8B",
      maxBodyBytes: 1 << 20, upstreamTimeoutMs: 10_000, ...proxyOpts,
    },
  );
  return {
    proxy, engine, sessions, records,
    failNextStore: () => (failNext = true),
    stop: async () => {
      await proxy.stop();
      await engine.stop();
    },
  };
}

/** Reads a whole SSE body into its frames ({event?, data}). */
export function parseSse(text: string): { event?: string; data: string }[] {
  return text
    .split(/\r?\n\r?\n/)
    .filter((f) => f.trim())
    .map((f) => {
      const out: { event?: string; data: string } = { data: "" };
      for (const line of f.split(/\r?\n/)) {
        if (line.startsWith("event: ")) out.event = line.slice(7);
        else if (line.startsWith("data: ")) out.data += line.slice(6);
      }
      return out;
    });
}
