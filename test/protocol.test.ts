import { describe, expect, it } from "vitest";
import { decode, encode, validate } from "../src/protocol/codec.ts";
import { errorFromWire, PolarError, ValidationError } from "../src/protocol/errors.ts";
import { SessionTiming, TaskRequest, Trace } from "../src/protocol/schemas.ts";
import { SUBJECTS, dispatchConsumer } from "../src/protocol/subjects.ts";

describe("subjects", () => {
  it("builds subjects and refuses tokens that would change their shape", () => {
    expect(SUBJECTS.trace("t1", "ses-1")).toBe("polar.trace.t1.ses-1");
    expect(SUBJECTS.trace("t.1", "s")).toBe("polar.trace.t_2E_1.s"); // a dotted id stays one token
    expect(SUBJECTS.dispatch("gpu-a")).toBe("polar.session.dispatch.gpu-a");
    for (const bad of ["a.b", "*", ">", "a b", ""]) expect(() => SUBJECTS.dispatch(bad)).toThrow(TypeError);
    expect(() => SUBJECTS.result("bad id")).toThrow(/not a valid id/);
    expect(dispatchConsumer("default")).toBe("polar-gateways-default");
  });
});

describe("codec", () => {
  it("round-trips msgpack and JSON", () => {
    const v = { a: [1, 2, 3], b: { c: "x" }, d: null, f: 0.25 };
    expect(decode(encode(v))).toEqual(v);
    const json = encode(v, "application/json");
    expect(new TextDecoder().decode(json)).toBe(JSON.stringify(v));
    expect(decode(json, "application/json")).toEqual(v);
  });

  it("turns undecodable bytes into a validation error", () => {
    expect(() => decode(new TextEncoder().encode("{not json"), "application/json")).toThrow(ValidationError);
  });

  it("validate names every bad field", () => {
    const err = (() => {
      try {
        validate(TaskRequest, { task_id: 5, num_samples: 0, agent: {} }, "task");
      } catch (e) {
        return e as ValidationError;
      }
    })()!;
    expect(err.issues.map((i) => i.path)).toEqual(expect.arrayContaining(["task_id", "instruction", "num_samples", "agent.harness"]));
  });
});

describe("schemas", () => {
  it("accepts a reference task as it is and fills defaults", () => {
    const t = TaskRequest.parse({
      task_id: "t",
      instruction: "do it",
      runtime: { image: "ubuntu:24.04", prepare: [{ type: "exec", command: "true" }] },
      agent: { harness: "claude_code", model_name: "m" },
    });
    expect(t.num_samples).toBe(1);
    expect(t.builder).toEqual({ strategy: "per_request", config: {} });
    expect(t.runtime?.backend).toBe("docker");
    expect(t.runtime?.prepare[0].max_attempts).toBe(1);
  });

  it("checks metadata.agent_timeout, trace alignment and timing keys", () => {
    const base = { task_id: "t", instruction: "", agent: { harness: "shell", custom_shell: { command: "true" } } };
    expect(TaskRequest.safeParse({ ...base, metadata: { agent_timeout: true } }).success).toBe(false);
    expect(TaskRequest.safeParse({ ...base, metadata: { agent_timeout: 5 } }).success).toBe(true);
    expect(TaskRequest.safeParse({ ...base, runtime: { backend: "docker" } }).success).toBe(false); // image required
    expect(TaskRequest.safeParse({ ...base, runtime: { backend: "local" } }).success).toBe(true);
    expect(Trace.safeParse({ response_ids: [1, 2], loss_mask: [1] }).success).toBe(false);
    expect(Trace.safeParse({ response_ids: [1, 2], response_logprobs: [-1] }).success).toBe(false);
    expect(SessionTiming.safeParse({ not_a_timing: 1 }).success).toBe(false);
  });
});

describe("errors", () => {
  it("survive a wire round trip with code, retryable, details and cause", () => {
    const e = new PolarError("upstream", "bad gateway", { cause: new ValidationError("x", [{ path: "a", message: "m" }]), details: { url: "u" } });
    const back = errorFromWire(JSON.parse(JSON.stringify(e.toWire())));
    expect(back.code).toBe("upstream");
    expect(back.retryable).toBe(true);
    expect(back.details).toEqual({ url: "u" });
    expect((back.cause as PolarError).code).toBe("validation");
    expect(back.httpStatus).toBe(502);
  });
});
