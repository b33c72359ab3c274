/**
 * The learnable sim policy: a playbook's `choose` logits start at ln(p),
 * `POST /admin/weights` replaces them and bumps the policy version, and every
 * emitted step's token logprobs sum to the log-softmax of the sampled
 * alternative under the weights that sampled it.
 */
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSim, type SimHandle } from "../src/sim/server.ts";

const PLAYBOOK = join(fileURLToPath(new URL("..", import.meta.url)), "examples/grpo-loop/playbook.json");
const BASH = [{ type: "function", function: { name: "bash", parameters: { type: "object", properties: { command: { type: "string" } }, required: ["command"] } } }];
const CHOICES = ["expr 3 + 4 > a.txt", "expr 3 '*' 4 > a.txt", "expr 3 - 4 > a.txt", "expr 3 + 4 + 1 > a.txt"];

function logSoftmax(l: number[]): number[] {
  const m = Math.max(...l);
  const lse = m + Math.log(l.reduce((a, x) => a + Math.exp(x - m), 0));
  return l.map((x) => x - lse);
}

describe("sim --policy learnable", () => {
  let sim: SimHandle;
  beforeAll(async () => {
    sim = await startSim({ policy: "learnable", playbookPath: PLAYBOOK });
  });
  afterAll(async () => {
    await sim?.stop();
  });

  async function sample(session: string) {
    const res = await fetch(`${sim.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-polar-session-id": session },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "Write the sum of 3 and 4 into `a.txt`." }], tools: BASH, logprobs: true, return_token_ids: true }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as any;
    const choice = body.choices[0];
    const command = JSON.parse(choice.message.tool_calls[0].function.arguments).command as string;
    const lps = choice.logprobs.content.map((c: { logprob: number }) => c.logprob) as number[];
    expect(lps).toHaveLength(choice.token_ids.length);
    return { alt: CHOICES.indexOf(command), sum: lps.reduce((a, b) => a + b, 0), version: body.policy_version as string };
  }

  it("starts at ln(p) and every answer's logprobs sum to the sampled alternative's log-probability", async () => {
    const w = (await (await fetch(`${sim.url}/admin/weights`)).json()) as any;
    expect(w.policy_version).toBe("0");
    expect(w.points.map((p: { key: string }) => p.key)).toEqual(["sum/0", "product/0", "difference/0"]);
    expect(w.points[0].log_probs).toEqual([Math.log(0.25), Math.log(0.25), Math.log(0.25), Math.log(0.25)]);
    const seen = new Set<number>();
    for (let i = 0; i < 24; i++) {
      const s = await sample(`init-${i}`);
      expect(s.alt).toBeGreaterThanOrEqual(0);
      expect(Math.abs(s.sum - Math.log(0.25))).toBeLessThan(1e-9);
      expect(s.version).toBe("0");
      seen.add(s.alt);
    }
    expect(seen.size).toBe(4);
  });

  it("POST /admin/weights sets the logits and bumps the version; samples follow the new softmax exactly", async () => {
    const logits = [2, -1, 0.5, -3];
    const r = await fetch(`${sim.url}/admin/weights`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ weights: { "sum/0": logits } }) });
    expect(r.status).toBe(200);
    expect(((await r.json()) as any).policy_version).toBe("1");
    const lp = logSoftmax(logits);
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 60; i++) {
      const s = await sample(`new-${i}`);
      expect(Math.abs(s.sum - lp[s.alt])).toBeLessThan(1e-9);
      expect(s.version).toBe("1");
      counts[s.alt]++;
    }
    // p = [0.77, 0.04, 0.17, 0.01]: the first alternative dominates.
    expect(counts[0]).toBeGreaterThan(35);
    expect(counts[0]).toBeGreaterThan(counts[1] + counts[2] + counts[3]);
  });

  it("refuses a bad update as a whole and keeps the weights and version", async () => {
    const before = (await (await fetch(`${sim.url}/admin/weights`)).json()) as any;
    const r = await fetch(`${sim.url}/admin/weights`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ weights: { "product/0": [0, 0, 0, 9], "sum/0": [1, 2] , "nope/3": [1] } }),
    });
    expect(r.status).toBe(400);
    const msg = ((await r.json()) as any).error.message as string;
    expect(msg).toContain("sum/0: must be an array of 4 logits");
    expect(msg).toContain("nope/3: no such choice point");
    expect(await (await fetch(`${sim.url}/admin/weights`)).json()).toEqual(before);
  });
});
