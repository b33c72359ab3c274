/**
 * Hostile input against a real nats-server, supervisor, gateway (with its
 * proxy) and the sim: the HTTP task API (every route), the NATS API (every
 * `polar.api.*` subject, JSON and msgpack) and every proxy route. A named
 * corpus (deep nesting, huge strings, NUL/RTL/surrogates/emoji and subject
 * wildcards in ids, malformed percent-encoding, wrong types, huge numbers,
 * 10 MB bodies, invalid JSON, wrong content types) plus fast-check properties
 * with a fixed seed (POLAR_FUZZ_SEED overrides it; fast-check prints the seed
 * and path of a failure). Every case: a 4xx in the caller's own format (the
 * API's `{code, message, retryable, details}`, the vendor's error body, the
 * NATS API's typed error reply), never a 5xx; the process answers a valid
 * request right after; nothing is stored (no task record, no stream message),
 * the proxy records nothing and calls no upstream, and nothing is left running.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { encode, makeHeaders, decode } from "../src/protocol/codec.ts";
import { ERROR_CODES, type WireError } from "../src/protocol/errors.ts";
import { CONTENT_TYPES, STREAMS, SUBJECTS } from "../src/protocol/subjects.ts";
import type { GatewayHandle } from "../src/actors/gateway/index.ts";
import { startTestSystem, type TestSystem } from "./helpers/system.ts";

const SEED = Number(process.env.POLAR_FUZZ_SEED ?? 20_261_130);
const RUNS = 40;
const MB = 1024 * 1024;

let sys: TestSystem;
let gw: GatewayHandle;
let api: string;
let proxy: string;
let credential: string;
let dir: string;
const HOLDER = "fuzz-holder";

// ------------------------------------------------------------ hostile values

/** `depth` nested arrays (or objects) as JSON text, built without recursion. */
const deepArray = (depth: number) => "[".repeat(depth) + "]".repeat(depth);
const deepObject = (depth: number) => '{"a":'.repeat(depth) + "1" + "}".repeat(depth);
function deepValue(depth: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
}

/** Ids no route may accept: each breaks `^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`. */
const HOSTILE_IDS: Record<string, string> = {
  nul: "task\u0000x",
  rtl: "task\u202Egpj.exe",
  lone_surrogate: "task\uD800x",
  emoji: "task😀",
  dot_star: "task.*",
  gt: "task.>",
  star: "*",
  gt_only: ">",
  space: "task x",
  empty: "",
  leading_dot: ".task",
  too_long: "t".repeat(129),
  huge: "t".repeat(1_000_000),
  newline: "task\nx",
  slash: "../etc",
};

/** Raw path segments: malformed percent-encoding and encoded hostile bytes. */
const HOSTILE_SEGMENTS: Record<string, string> = {
  lone_percent: "%",
  truncated_utf8: "%E0%A4%A",
  bad_hex: "a%ZZb",
  encoded_nul: "a%00b",
  encoded_surrogate: "%ED%A0%80",
  encoded_slash: "a%2Fb",
  encoded_star: "a%2A",
  encoded_gt: "a%3E",
  encoded_space: "a%20b",
  encoded_rtl: "a%E2%80%AEb",
  long: "x".repeat(6_000),
};

/** Numbers no count, budget or version may take. */
const HOSTILE_NUMBERS: Record<string, unknown> = {
  huge: 1e308,
  neg_zero: -0,
  nan_string: "NaN",
  inf_string: "Infinity",
  beyond_safe: 2 ** 53 + 1,
  negative: -1,
  fraction: 0.5,
  numeric_string: "5",
  big_negative: -1e308,
};

const WRONG_TYPES: Record<string, unknown> = { array: [], object: {}, bool: true, null: null, string: "x" };

// ------------------------------------------------------------ assertions

function expectApiError(status: number, body: any, what: string): void {
  expect(status, `${what}: ${JSON.stringify(body).slice(0, 300)}`).toBeGreaterThanOrEqual(400);
  expect(status, what).toBeLessThan(500);
  expect(body?.error, what).toBeTypeOf("object");
  const e = body.error as WireError;
  expect(Object.keys(ERROR_CODES), what).toContain(e.code);
  expect(ERROR_CODES[e.code].http, what).toBe(status);
  expect(e.message, what).toBeTypeOf("string");
  expect(e.retryable, what).toBe(false);
}

type Vendor = "openai" | "anthropic" | "google";

function expectVendorError(vendor: Vendor, status: number, body: any, what: string): void {
  expect(status, `${what}: ${JSON.stringify(body).slice(0, 300)}`).toBeGreaterThanOrEqual(400);
  expect(status, what).toBeLessThan(500);
  if (vendor === "openai") {
    expect(body.error.message, what).toBeTypeOf("string");
    expect(body.error.type, what).toBeTypeOf("string");
  } else if (vendor === "anthropic") {
    expect(body.type, what).toBe("error");
    expect(body.error.type, what).toBeTypeOf("string");
    expect(body.error.message, what).toBeTypeOf("string");
  } else {
    expect(body.error.code, what).toBe(status);
    expect(body.error.status, what).toBeTypeOf("string");
    expect(body.error.message, what).toBeTypeOf("string");
  }
}

async function http(method: string, url: string, body?: string | Buffer, headers: Record<string, string> = {}) {
  const res = await fetch(url, { method, body, headers: { "content-type": "application/json", ...headers } });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = { unparsable: text.slice(0, 200) };
  }
  return { status: res.status, body: json as any, contentType: res.headers.get("content-type") ?? "" };
}

/** A raw NATS API request; resolves the decoded reply. */
async function natsRaw(subject: string, data: Uint8Array, ct: string) {
  const msg = await sys.client.request(subject, data, { timeout: 15_000, headers: makeHeaders(ct as never) });
  const replyCt = msg.headers?.get("content-type") ?? CONTENT_TYPES.msgpack;
  expect(replyCt, subject).toBe(ct);
  return decode(msg.data, replyCt as never) as { ok: boolean; data?: unknown; error?: WireError };
}

function expectNatsError(reply: { ok: boolean; error?: WireError }, what: string): void {
  expect(reply.ok, `${what}: ${JSON.stringify(reply).slice(0, 300)}`).toBe(false);
  const e = reply.error!;
  expect(Object.keys(ERROR_CODES), what).toContain(e.code);
  expect(ERROR_CODES[e.code].http, `${what}: ${e.code} ${e.message.slice(0, 200)}`).toBeGreaterThanOrEqual(400);
  expect(ERROR_CODES[e.code].http, `${what}: ${e.code} ${e.message.slice(0, 200)}`).toBeLessThan(500);
  expect(e.message, what).toBeTypeOf("string");
}

// ------------------------------------------------------------ what is stored

async function streamState(name: string): Promise<{ messages: number; last_seq: number }> {
  const r = await sys.client.request(`$JS.API.STREAM.INFO.${name}`);
  return JSON.parse(new TextDecoder().decode(r.data)).state;
}

/** Counts that any stored task, session, result or trace would move. */
async function stored(): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const s of [STREAMS.sessions, STREAMS.results, STREAMS.traces, STREAMS.evals]) out[s] = (await streamState(s)).last_seq;
  for (const b of ["KV_polar_tasks", "KV_polar_task_flags"]) out[b] = (await streamState(b)).messages;
  out.upstream_calls = sys.upstream.exchanges.length;
  out.captured = capturedCalls(await gw.prometheus());
  return out;
}

function capturedCalls(prom: string): number {
  let n = 0;
  for (const line of prom.split("\n")) if (line.startsWith("polar_proxy_captured_calls_total")) n += Number(line.split(" ").pop());
  return n;
}

/** Every process still answers a valid request. */
async function alive(): Promise<void> {
  const h = await http("GET", `${api}/health`);
  expect(h.status).toBe(200);
  const st = await natsRaw(SUBJECTS.api.status, encode({}), CONTENT_TYPES.msgpack);
  expect(st.ok).toBe(true);
  const get = await natsRaw(SUBJECTS.api.get, encode({ task_id: HOLDER }, CONTENT_TYPES.json), CONTENT_TYPES.json);
  expect(get.ok, JSON.stringify(get.error)).toBe(true);
  const p = await http("GET", `${proxy}/health`);
  expect(p.status).toBe(200);
  const models = await http("GET", `${proxy}/v1/models`, undefined, { authorization: `Bearer ${credential}` });
  expect(models.status).toBe(200);
}

async function until<T>(what: string, f: () => Promise<T | undefined>, ms = 60_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

let before: Record<string, number>;
let snap: Record<string, number>;
beforeEach(async () => {
  if (sys) snap = await stored();
});

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "polar-sec-fuzz-"));
  sys = await startTestSystem();
  api = (await sys.startSupervisor()).httpUrl!;
  // The suite calls the proxy from the test process with the held session's credential: binding
  // credentials to their sandbox (tested on its own) would refuse every call before its body is read.
  gw = await sys.startGateway({ proxy: { upstreams: [sys.upstream.url], bindCredentials: "off" } });
  proxy = gw.proxyUrl;
  // A session that stays RUNNING: its credential lets the proxy read (and refuse) hostile bodies.
  const credFile = join(dir, "cred");
  const release = join(dir, "release");
  const script = join(dir, "hold.mjs");
  await writeFile(
    script,
    `import { writeFileSync, existsSync } from "node:fs";
writeFileSync(process.env.CRED_FILE, process.env.OPENAI_API_KEY);
const t = setInterval(() => { if (existsSync(process.env.RELEASE_FILE)) clearInterval(t); }, 100);
`,
  );
  const submit = await http(
    "POST",
    `${api}/rollout/task/submit`,
    JSON.stringify({
      task_id: HOLDER, instruction: "hold", num_samples: 1, timeout_seconds: 600,
      runtime: { backend: "local", kwargs: { isolation: "none" } },
      agent: { harness: "shell", custom_shell: { command: `node ${JSON.stringify(script)}`, env: { CRED_FILE: credFile, RELEASE_FILE: release } } },
    }),
  );
  expect(submit.status, JSON.stringify(submit.body)).toBe(200);
  credential = await until("the held session's credential", async () => (await readFile(credFile, "utf8")) || undefined);
  before = await stored();
}, 90_000);

afterAll(async () => {
  await sys?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

// ------------------------------------------------------------ HTTP task API

const validTask = () => ({
  task_id: "fuzz-ok", instruction: "say hello", num_samples: 1, timeout_seconds: 60,
  runtime: { backend: "local", kwargs: { isolation: "none" } },
  agent: { harness: "shell", custom_shell: { command: "true" } },
});

/** Submit bodies, each invalid in exactly one hostile way. */
function hostileSubmits(): Array<[string, string | Buffer]> {
  const cases: Array<[string, string | Buffer]> = [];
  const withField = (path: string[], v: unknown) => {
    const t: any = validTask();
    let o = t;
    for (const k of path.slice(0, -1)) o = o[k];
    o[path[path.length - 1]] = v;
    return t;
  };
  for (const [n, id] of Object.entries(HOSTILE_IDS)) cases.push([`task_id ${n}`, JSON.stringify(withField(["task_id"], id))]);
  for (const [n, v] of Object.entries({ ...HOSTILE_NUMBERS, ...WRONG_TYPES })) {
    cases.push([`num_samples ${n}`, JSON.stringify(withField(["num_samples"], v))]);
    // A budget may be fractional (0.5 s); every other hostile number is refused.
    if (n !== "fraction") cases.push([`timeout_seconds ${n}`, JSON.stringify(withField(["timeout_seconds"], v))]);
  }
  for (const [n, v] of Object.entries(WRONG_TYPES)) {
    if (n !== "object") cases.push([`metadata ${n}`, JSON.stringify(withField(["metadata"], v))]);
    if (n !== "string") cases.push([`instruction ${n}`, JSON.stringify(withField(["instruction"], v))]);
    cases.push([`agent ${n}`, JSON.stringify(withField(["agent"], v))]);
    if (n !== "array") cases.push([`runtime.prepare ${n}`, JSON.stringify(withField(["runtime", "prepare"], v))]);
  }
  const head = JSON.stringify(validTask()).slice(0, -1);
  for (const depth of [33, 2000, 5000, 100_000]) {
    cases.push([`metadata nested ${depth}`, `${head},"metadata":${deepObject(depth)}}`]);
    cases.push([`runtime.kwargs nested ${depth}`, JSON.stringify(validTask()).replace('{"isolation":"none"}', deepObject(depth))]);
    cases.push([`body nested ${depth}`, deepArray(depth)]);
  }
  cases.push(["instruction over the limit", JSON.stringify(withField(["instruction"], "x".repeat(262_145)))]);
  cases.push(["harness name 1 MB", JSON.stringify(withField(["agent", "harness"], "h".repeat(MB)))]);
  cases.push(["env value 7 MB", JSON.stringify(withField(["agent", "custom_shell", "env"], { A: "v".repeat(7 * MB) }))]);
  cases.push(["10 MB body", Buffer.alloc(10 * MB, 0x20)]);
  cases.push(["callback gopher", JSON.stringify(withField(["callback_url"], "gopher://127.0.0.1/"))]);
  for (const [n, raw] of Object.entries({ truncated: "{", trailing: '{"a":1}garbage', nan: "NaN", nul: "\u0000", bom_only: "\uFEFF", xml: "<task/>", single_quotes: "{'a':1}" })) {
    cases.push([`invalid JSON ${n}`, raw]);
  }
  for (const [n, v] of Object.entries({ string: "x", number: 1, array: [], null: null, true: true })) cases.push([`body is ${n}`, JSON.stringify(v)]);
  return cases;
}

describe("HTTP task API", () => {
  it("refuses every hostile submit with a 4xx in the API's format and stores nothing", { timeout: 60_000 }, async () => {
    for (const [name, body] of hostileSubmits()) {
      const r = await http("POST", `${api}/rollout/task/submit`, body);
      expectApiError(r.status, r.body, `submit ${name}`);
      if (/^(metadata|runtime.kwargs) nested (2000|5000)/.test(name)) expect(r.body.error.message, name).toMatch(/limit/);
    }
    const xml = await http("POST", `${api}/rollout/task/submit`, "<task/>", { "content-type": "application/xml" });
    expectApiError(xml.status, xml.body, "xml content type");
    expect(await stored()).toEqual(snap);
    await alive();
  });

  it("names the limit it enforces", async () => {
    const head = JSON.stringify(validTask()).slice(0, -1);
    const deep = await http("POST", `${api}/rollout/task/submit`, `${head},"metadata":${deepObject(2000)}}`);
    expect(deep.body.error.message).toContain("limit of 32 levels");
    const big = await http("POST", `${api}/rollout/task/submit`, Buffer.alloc(10 * MB, 0x20));
    expect(big.status).toBe(413);
    expect(big.body.error.message).toContain(`limit of ${8 * MB}`);
    const long = await http("POST", `${api}/rollout/task/submit`, JSON.stringify({ ...validTask(), task_id: "t".repeat(129) }));
    expect(long.body.error.details.issues[0].path).toBe("task_id");
  });

  it("refuses hostile ids and malformed segments on every path route", { timeout: 60_000 }, async () => {
    const segments = { ...HOSTILE_SEGMENTS, ...Object.fromEntries(Object.entries(HOSTILE_IDS).filter(([n]) => n !== "huge" && n !== "lone_surrogate" && n !== "empty").map(([n, id]) => [n, encodeURIComponent(id)])) };
    for (const [name, seg] of Object.entries(segments)) {
      const routes: Array<[string, string, string?]> = [
        ["GET", `/rollout/task/${seg}`],
        ["GET", `/rollout/task/${seg}?results=true&offset=0&limit=5`],
        ["DELETE", `/rollout/task/${seg}?register_if_missing=true`],
        ["GET", `/rollout/task/${seg}/traces`],
        ["GET", `/rollout/task/${seg}/results`],
        ["POST", `/rollout/nodes/${seg}/drain`, "{}"],
        ["GET", `/dashboard/api/task/${seg}`],
        ["GET", `/dashboard/api/trace/${seg}/${seg}`],
      ];
      for (const [method, path, body] of routes) {
        const r = await http(method, `${api}${path}`, body);
        expectApiError(r.status, r.body, `${method} ${path.slice(0, 80)} (${name})`);
      }
    }
    expect(await stored()).toEqual(snap);
    await alive();
  });

  it("refuses hostile query values and bodies of the other write routes", { timeout: 60_000 }, async () => {
    const values = ["1e308", "-0", "NaN", "Infinity", String(2 ** 53 + 1), "-1", "0.5", "0x10", "9".repeat(400), "many", "%", "%00"];
    for (const v of values) {
      const name = v.slice(0, 20);
      for (const q of ["offset", "limit"]) {
        const r = await http("GET", `${api}/rollout/task/${HOLDER}?results=true&${q}=${v}`);
        expectApiError(r.status, r.body, `?${q}=${name}`);
      }
    }
    const r = await http("GET", `${api}/rollout/task/${HOLDER}?results=maybe`);
    expectApiError(r.status, r.body, "?results=maybe");
    const bodies: Record<string, string | Buffer> = {
      deep: deepObject(5000), array: "[]", invalid: "{", ten_mb: Buffer.alloc(10 * MB, 0x20), unknown_key: '{"zzz":1}',
      ...Object.fromEntries(Object.entries({ ...HOSTILE_NUMBERS, ...WRONG_TYPES }).map(([n, v]) => [`number ${n}`, JSON.stringify({ timeout_seconds: v, policy_version: v })])),
    };
    for (const [name, body] of Object.entries(bodies)) {
      for (const path of ["/rollout/inference/pause", "/rollout/inference/resume", `/rollout/nodes/${gw.nodeId}-not/drain`]) {
        const res = await http("POST", `${api}${path}`, body);
        expectApiError(res.status, res.body, `POST ${path} ${name}`);
      }
    }
    const ctl = await http("GET", `${api}/rollout/inference`);
    expect(ctl.body).toMatchObject({ paused: false, policy_version: 0 });
    expect(await stored()).toEqual(snap);
    await alive();
  });

  it("property: a submit with one hostile field is a 4xx and stores nothing", { timeout: 60_000 }, async () => {
    const field = fc.constantFrom("task_id", "num_samples", "metadata", "agent", "runtime", "callback_url");
    await fc.assert(
      fc.asyncProperty(field, hostileValue(field.toString()), async (f, v) => {
        const t: any = { ...validTask(), [f]: fixUp(f, v) };
        const r = await http("POST", `${api}/rollout/task/submit`, JSON.stringify(t));
        expectApiError(r.status, r.body, `submit ${f}=${JSON.stringify(v).slice(0, 100)}`);
      }),
      { seed: SEED, numRuns: RUNS },
    );
    expect(await stored()).toEqual(snap);
    await alive();
  });

  it("property: arbitrary JSON on every write route is a 4xx and stores nothing", { timeout: 60_000 }, async () => {
    const route = fc.constantFrom("/rollout/task/submit", "/rollout/inference/pause", "/rollout/inference/resume", "/rollout/nodes/x-none/drain");
    await fc.assert(
      fc.asyncProperty(route, fc.jsonValue({ maxDepth: 6 }), async (path, v) => {
        const body = path.includes("inference") && isPlainObject(v) ? { ...(v as object), zz_unknown: 1 } : v;
        const r = await http("POST", `${api}${path}`, JSON.stringify(body));
        expectApiError(r.status, r.body, `${path} ${JSON.stringify(body).slice(0, 100)}`);
      }),
      { seed: SEED, numRuns: RUNS },
    );
    expect(await stored()).toEqual(snap);
  });
});

const isPlainObject = (v: unknown) => typeof v === "object" && v !== null && !Array.isArray(v);

/** A value no strict field of a task accepts: a non-id string, a bad number, a wrong type, or a deep value. */
function hostileValue(_field: string) {
  const badString = fc.oneof(
    fc.constantFrom(...Object.values(HOSTILE_IDS).filter((s) => s.length < 2000)),
    fc.tuple(fc.string({ maxLength: 20 }), fc.constantFrom("\u0000", "*", ">", " ", "\u202E", "\uD800", "😀", "%ZZ"), fc.string({ maxLength: 20 })).map(([a, b, c]) => `x${a}${b}${c}`),
  );
  const badNumber = fc.oneof(
    fc.constantFrom(...Object.values(HOSTILE_NUMBERS)),
    fc.double({ noNaN: true }).filter((d) => !Number.isInteger(d) || d < 0 || d > 1e12),
    fc.integer({ min: 2 ** 20, max: 2 ** 30 }).map((n) => n * 1e6),
  );
  const deep = fc.integer({ min: 33, max: 1000 }).map((d) => deepValue(d));
  const wrong = fc.oneof(fc.boolean(), fc.constant(null), fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 3 }));
  return fc.oneof(badString, badNumber, deep, wrong);
}

/** Makes a hostile value invalid for its field whatever it is (a string is a valid callback host name, a deep object a valid runtime). */
function fixUp(field: string, v: unknown): unknown {
  if (field === "callback_url" && typeof v === "string") return `gopher://${v}`;
  if (field === "callback_url" && v === null) return "file:///etc/passwd"; // null means "no callback"
  if (field === "agent" && v === null) return 1;
  if ((field === "metadata" || field === "runtime" || field === "agent") && isPlainObject(v)) return field === "metadata" ? v : { backend: v, harness: v };
  if (field === "metadata" && typeof v === "string") return [v];
  return v;
}

// ------------------------------------------------------------ NATS API

const NATS_SUBJECTS = {
  submit: SUBJECTS.api.submit,
  get: SUBJECTS.api.get,
  cancel: SUBJECTS.api.cancel,
  nodeDrain: SUBJECTS.api.nodeDrain,
  inferencePause: SUBJECTS.api.inferencePause,
  inferenceResume: SUBJECTS.api.inferenceResume,
};

/** Hostile bodies for every subject: each field any of them reads carries the same bad value. */
function natsBodies(): Array<[string, unknown]> {
  const out: Array<[string, unknown]> = [];
  const all = (v: unknown) => ({ task_id: v, node_id: v, timeout_seconds: v, policy_version: v, instruction: v, zz_unknown: 1 });
  for (const [n, id] of Object.entries(HOSTILE_IDS)) out.push([`id ${n}`, all(id)]);
  for (const [n, v] of Object.entries({ ...HOSTILE_NUMBERS, ...WRONG_TYPES })) out.push([`value ${n}`, all(v)]);
  for (const depth of [2000, 5000]) out.push([`nested ${depth}`, all(deepValue(depth))]);
  out.push(["7 MB id", { task_id: "x".repeat(7 * MB), node_id: "x", zz_unknown: 1 }]);
  for (const [n, v] of Object.entries({ string: "x", number: 1, array: [1], null: null, true: true })) out.push([`body ${n}`, v]);
  return out;
}

describe("NATS API", () => {
  it("answers every hostile body on every subject, in JSON and msgpack, with a typed error in the same encoding; stores nothing", { timeout: 90_000 }, async () => {
    for (const ct of [CONTENT_TYPES.json, CONTENT_TYPES.msgpack]) {
      for (const [name, body] of natsBodies()) {
        let data: Uint8Array;
        try {
          data = encode(body, ct);
        } catch (err) {
          // JSON.stringify of 5,000 levels fits V8's stack; msgpackr's encoder may not: the sender cannot even build it.
          expect(String(err), name).toMatch(/call stack/);
          continue;
        }
        for (const [sname, subject] of Object.entries(NATS_SUBJECTS)) {
          // No body (or null) asks for a pause with the default drain timeout: a valid request.
          if (sname === "inferencePause" && body === null) continue;
          expectNatsError(await natsRaw(subject, data, ct), `${sname} ${ct} ${name}`);
        }
      }
      // Bytes that are not what the header says.
      const garbage: Record<string, Uint8Array> = {
        truncated: ct === CONTENT_TYPES.json ? new TextEncoder().encode('{"task_id":') : encode({ task_id: "x" }).slice(0, 4),
        never_used_byte: new Uint8Array([0xc1, 0xc1, 0xc1]),
        deep: new TextEncoder().encode(deepArray(5000)),
        nul: new Uint8Array([0]),
      };
      for (const [name, data] of Object.entries(garbage)) {
        for (const [sname, subject] of Object.entries({ ...NATS_SUBJECTS, status: SUBJECTS.api.status })) {
          const reply = await natsRaw(subject, data, ct);
          // `status` reads no body; a body it can decode is ignored, one it cannot is refused.
          if (sname === "status" && reply.ok) continue;
          expectNatsError(reply, `${sname} ${ct} ${name}`);
        }
      }
    }
    expect(await stored()).toEqual(snap);
    await alive();
  });

  it("a 10 MB message is refused by the client before it reaches the server; the server answers after", async () => {
    const big = encode({ task_id: "x".repeat(10 * MB) });
    await expect(sys.client.request(SUBJECTS.api.submit, big, { timeout: 5000 })).rejects.toThrow(/payload|exceeded/i);
    expect(await stored()).toEqual(snap);
    await alive();
  });

  it("property: arbitrary values on every subject are typed errors", { timeout: 60_000 }, async () => {
    const subject = fc.constantFrom(...Object.values(NATS_SUBJECTS));
    const ct = fc.constantFrom(CONTENT_TYPES.json, CONTENT_TYPES.msgpack);
    const body = fc.oneof(
      fc.jsonValue({ maxDepth: 5 }).map((v) => (isPlainObject(v) ? { ...(v as object), task_id: "x*", node_id: "x>", zz_unknown: 1 } : v)),
      hostileValue("task_id").map((v) => ({ task_id: v, node_id: v, policy_version: v, timeout_seconds: v })),
    );
    await fc.assert(
      fc.asyncProperty(subject, ct, body, async (s, c, b) => {
        expectNatsError(await natsRaw(s, encode(b, c), c), `${s} ${c} ${JSON.stringify(b).slice(0, 100)}`);
      }),
      { seed: SEED, numRuns: RUNS * 2 },
    );
    expect(await stored()).toEqual(snap);
  });
});

// ------------------------------------------------------------ proxy

interface ProxyRoute {
  name: string;
  path: string;
  vendor: Vendor;
  headers?: Record<string, string>;
}

const PROXY_ROUTES: ProxyRoute[] = [
  { name: "openai chat", path: "/v1/chat/completions", vendor: "openai" },
  { name: "responses", path: "/v1/responses", vendor: "openai" },
  { name: "anthropic messages", path: "/v1/messages", vendor: "anthropic", headers: { "anthropic-version": "2023-06-01" } },
  { name: "anthropic count_tokens", path: "/v1/messages/count_tokens", vendor: "anthropic", headers: { "anthropic-version": "2023-06-01" } },
  { name: "google generateContent", path: "/v1beta/models/m:generateContent", vendor: "google" },
  { name: "google streamGenerateContent", path: "/v1beta/models/m:streamGenerateContent", vendor: "google" },
  { name: "google countTokens", path: "/v1beta/models/m:countTokens", vendor: "google" },
];

/** Proxy bodies, each wrong in one hostile way that every route must refuse (token counting reads no output budget). */
function hostileProxyBodies(counting: boolean): Array<[string, string | Buffer, Record<string, string>?]> {
  const out: Array<[string, string | Buffer, Record<string, string>?]> = [];
  for (const depth of [2000, 5000]) {
    out.push([`messages nested ${depth}`, `{"model":"m","max_tokens":5,"messages":${deepArray(depth)},"input":${deepArray(depth)},"contents":${deepArray(depth)}}`]);
    out.push([`tool schema nested ${depth}`, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"input":"hi","contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"type":"function","name":"f","function":{"name":"f","parameters":${deepObject(depth)}},"input_schema":${deepObject(depth)},"functionDeclarations":[{"name":"f","parameters":${deepObject(depth)}}]}]}`]);
    out.push([`body nested ${depth}`, deepArray(depth)]);
  }
  for (const [n, v] of Object.entries(WRONG_TYPES)) {
    if (n === "array") continue;
    out.push([`messages ${n}`, JSON.stringify({ model: "m", max_tokens: 5, messages: v, input: n === "string" ? 5 : v, contents: v })]);
  }
  const ok = { messages: [{ role: "user", content: "hi" }], input: "hi", contents: [{ role: "user", parts: [{ text: "hi" }] }] };
  for (const [n, v] of Object.entries(counting ? {} : { nan_string: "NaN", inf_string: "Infinity", array: [1], object: {}, bool: true })) {
    out.push([`max_tokens ${n}`, JSON.stringify({ model: "m", ...ok, max_tokens: v, max_output_tokens: v, generationConfig: { maxOutputTokens: v } })]);
  }
  out.push(["model name 1 MB", JSON.stringify({ model: "m".repeat(MB), max_tokens: 5, ...ok })]);
  out.push(["model name with NUL and RTL of 100 KB", JSON.stringify({ model: "\u0000\u202E".repeat(50_000), max_tokens: 5, ...ok })]);
  out.push(["10 MB body", Buffer.alloc(10 * MB, 0x20)]);
  for (const [n, raw] of Object.entries({ truncated: "{", trailing: '{"a":1}garbage', nan: "NaN", nul: "\u0000", xml: "<x/>", number: "1", string: '"hi"', null: "null" })) {
    out.push([`invalid JSON ${n}`, raw]);
  }
  out.push(["xml content type", JSON.stringify({ model: "m", max_tokens: 5, ...ok }), { "content-type": "application/xml" }]);
  out.push(["form content type", "a=1", { "content-type": "application/x-www-form-urlencoded" }]);
  out.push(["unknown content encoding", JSON.stringify({ model: "m", max_tokens: 5, ...ok }), { "content-encoding": "zstd-x" }]);
  out.push(["gzip that is not gzip", "not gzip at all", { "content-encoding": "gzip" }]);
  return out;
}

describe("proxy", () => {
  it("refuses every hostile body on every route in the vendor's format, calls no upstream and records nothing", { timeout: 90_000 }, async () => {
    for (const route of PROXY_ROUTES) {
      for (const [name, body, headers] of hostileProxyBodies(route.name.includes("ount"))) {
        const r = await http("POST", `${proxy}${route.path}`, body, { authorization: `Bearer ${credential}`, "x-api-key": credential, "x-goog-api-key": credential, ...route.headers, ...headers });
        expectVendorError(route.vendor, r.status, r.body, `${route.name} ${name}`);
        expect(sys.upstream.exchanges.length, `${route.name} ${name} reached the upstream`).toBe(snap.upstream_calls);
      }
    }
    expect(await stored()).toEqual(snap);
    await alive();
  });

  it("refuses hostile model segments, credentials and paths in the vendor's format", { timeout: 60_000 }, async () => {
    const auth = { authorization: `Bearer ${credential}`, "x-goog-api-key": credential };
    for (const [name, seg] of Object.entries(HOSTILE_SEGMENTS)) {
      if (name.startsWith("encoded_") || name === "long") continue; // well-formed: a model name, answered (below)
      for (const path of [`/v1beta/models/${seg}:generateContent`, `/v1beta/models/${seg}:streamGenerateContent`, `/v1beta/models/${seg}:countTokens`]) {
        const r = await http("POST", `${proxy}${path}`, "{}", auth);
        expectVendorError("google", r.status, r.body, `${path} (${name})`);
      }
      const get = await http("GET", `${proxy}/v1/models/${seg}`, undefined, auth);
      expectVendorError("openai", get.status, get.body, `GET /v1/models/${name}`);
      const ant = await http("GET", `${proxy}/v1/models/${seg}`, undefined, { ...auth, "anthropic-version": "2023-06-01" });
      expectVendorError("anthropic", ant.status, ant.body, `GET anthropic /v1/models/${name}`);
      const cred = await http("POST", `${proxy}/s/${seg}/v1/chat/completions`, "{}");
      expectVendorError("openai", cred.status, cred.body, `/s/${name}/`);
    }
    for (const [name, id] of Object.entries(HOSTILE_IDS)) {
      if (name === "huge" || name === "nul" || name === "newline" || name === "lone_surrogate" || name === "emoji" || name === "rtl") continue; // not valid in a header
      const r = await http("POST", `${proxy}/v1/chat/completions`, "{}", { authorization: `Bearer ${id}` });
      expectVendorError("openai", r.status, r.body, `credential ${name}`);
      expect(r.status).toBe(401);
    }
    for (const route of PROXY_ROUTES) {
      const r = await http("POST", `${proxy}${route.path}`, "{}", { authorization: `Bearer ${"k".repeat(8000)}`, ...route.headers });
      expectVendorError(route.vendor, r.status, r.body, `${route.name} long credential`);
    }
    expect(await stored()).toEqual(snap);
    await alive();
  });

  it("property: arbitrary JSON objects with a hostile message list on every route are refused and record nothing", { timeout: 60_000 }, async () => {
    const route = fc.constantFrom(...PROXY_ROUTES);
    const badList = fc.oneof(fc.string(), fc.integer(), fc.constant(null), fc.boolean(), fc.object({ maxDepth: 2 }).filter((o) => !Array.isArray(o)));
    await fc.assert(
      fc.asyncProperty(route, fc.object({ maxDepth: 3 }), badList, async (rt, extra, list) => {
        const body = { ...extra, messages: list, input: typeof list === "string" ? 0 : list, contents: list };
        const r = await http("POST", `${proxy}${rt.path}`, JSON.stringify(body), { authorization: `Bearer ${credential}`, "x-goog-api-key": credential, ...rt.headers });
        expectVendorError(rt.vendor, r.status, r.body, `${rt.name} ${JSON.stringify(body).slice(0, 120)}`);
      }),
      { seed: SEED, numRuns: RUNS * 2 },
    );
    expect(await stored()).toEqual(snap);
    await alive();
  });
});

describe("after the storm", () => {
  it("nothing is left running: one task, one running session, the held one, and it finishes", { timeout: 60_000 }, async () => {
    const st = await http("GET", `${api}/rollout/status`);
    expect(st.body.running_tasks).toBe(1);
    expect(st.body.pending_sessions).toBe(1); // the held session's dispatch, acknowledged when it finishes
    const tasks = await http("GET", `${api}/dashboard/api/tasks`);
    expect(tasks.body.tasks.map((t: { task_id: string }) => t.task_id)).toEqual([HOLDER]);
    expect(gw.metrics().run_inflight).toBe(1);
    await writeFile(join(dir, "release"), "");
    await until("the held task to finish", async () => {
      const r = await http("GET", `${api}/rollout/task/${HOLDER}`);
      return ["completed", "failed"].includes(r.body.status) ? true : undefined;
    });
    expect(gw.metrics().run_inflight + gw.metrics().postrun_inflight).toBe(0);
    const after = await until("the queue to empty", async () => {
      const r = await http("GET", `${api}/rollout/status`);
      return r.body.pending_sessions === 0 ? r.body : undefined;
    });
    expect(after.running_tasks).toBe(0);
    expect(sys.upstream.exchanges.length).toBe(before.upstream_calls);
  });
});
