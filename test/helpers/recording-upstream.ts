/**
 * A real HTTP hop between the proxy and the sim that keeps every exchange,
 * so a test can compare what the inference server returned with what the
 * system captured and built.
 */
import { createServer, type IncomingHttpHeaders } from "node:http";
import { listen, closeServer, readBody } from "../../src/util/http.ts";

export interface Exchange {
  path: string;
  request: Record<string, unknown>;
  status: number;
  response: Record<string, unknown>;
}

export interface RecordingUpstream {
  url: string;
  exchanges: Exchange[];
  stop(): Promise<void>;
}

export async function startRecordingUpstream(target: string): Promise<RecordingUpstream> {
  const exchanges: Exchange[] = [];
  const server = createServer(async (req, res) => {
    const body = await readBody(req, 64 * 1024 * 1024);
    const upstream = await fetch(`${target}${req.url}`, {
      method: req.method,
      headers: forwardable(req.headers),
      body: req.method === "GET" ? undefined : body,
    });
    const text = await upstream.text();
    if (req.method === "POST") {
      exchanges.push({ path: req.url ?? "", request: JSON.parse(body.toString() || "{}"), status: upstream.status, response: safeJson(text) });
    }
    res.writeHead(upstream.status, { "content-type": upstream.headers.get("content-type") ?? "application/json" });
    res.end(text);
  });
  const port = await listen(server, 0, "127.0.0.1");
  return { url: `http://127.0.0.1:${port}`, exchanges, stop: () => closeServer(server) };
}

function forwardable(h: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) {
    if (typeof v === "string" && !["host", "content-length", "connection", "transfer-encoding"].includes(k)) out[k] = v;
  }
  return out;
}

function safeJson(text: string): Record<string, unknown> {
  try {
    return JSON.parse(text);
  } catch {
    return { raw: text };
  }
}
