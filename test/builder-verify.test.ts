import { describe, expect, it } from "vitest";
import { createBuilderRegistry } from "../src/builders/registry.ts";
import { verifyTrajectory } from "../src/builders/verify.ts";
import type { Trajectory } from "../src/protocol/schemas.ts";
import { record, session } from "./builder-fixtures.ts";

const EOT = 151645;
const P1 = [151644, 872, 198, 1, 2, EOT, 198, 151644, 77091, 198];
const P2 = [...P1, 300, EOT, 198, 151644, 872, 198, 3, EOT, 198, 151644, 77091, 198];
const P3 = [...P2, 500, EOT, 198, 151644, 872, 198, 4, EOT, 198, 151644, 77091, 198];
const sess = () =>
  session([
    record({ id: "a", seq: 0, prompt: P1, sampled: [300, EOT] }),
    record({ id: "b", seq: 1, prompt: P2, sampled: [500, EOT] }),
    record({ id: "c", seq: 2, prompt: P3, sampled: [600, 601, EOT] }),
    record({ id: "d", seq: 3, prompt: [151644, 872, 198, 9, EOT, 198], sampled: [700, EOT] }),
  ]);
const registry = createBuilderRegistry();
const merged = (s = sess()) => registry.resolve({ strategy: "prefix_merging", config: { end_of_turn_token_id: EOT } }, {}).build(s);
const clone = (t: Trajectory): Trajectory => structuredClone(t);

describe("verifyTrajectory", () => {
  it("passes both built-in builders and reports token counts", () => {
    const s = sess();
    const m = verifyTrajectory(merged(s), s);
    expect(m.errors).toEqual([]);
    expect(m.stats).toMatchObject({ traces: 2, traces_verified: 2, completions: 4, completions_trainable: 4, sampled_tokens_total: 9, sampled_tokens_trainable: 9, mask1_tokens: 9, mask0_tokens: 20 });
    const p = registry.resolve({ strategy: "per_request" }, {}).build(s);
    expect(verifyTrajectory(p, s)).toMatchObject({ ok: true, stats: { traces: 4, mask1_tokens: 9, mask0_tokens: 0 } });
  });

  it("proves traces without completion_ids by searching the session", () => {
    const s = sess();
    const t = clone(merged(s));
    for (const tr of t.traces) delete tr.metadata.completion_ids;
    expect(verifyTrajectory(t, s).errors).toEqual([]);
  });

  const tamper: [string, (t: Trajectory) => void, RegExp][] = [
    ["a sampled token", (t) => (t.traces[0].response_ids[12] = 501), /token 501 is not b's sampled token 500/],
    ["a logprob", (t) => (t.traces[0].response_logprobs![0] += 0.001), /logprob .* is not a's/],
    ["a synthetic logprob", (t) => (t.traces[0].response_logprobs![2] = -0.5), /mask-0 token has logprob -0.5/],
    ["an interstitial token", (t) => (t.traces[0].response_ids[4] = 42), /mask-0 tokens are not interstitials of b/],
    ["a mask", (t) => (t.traces[0].loss_mask[2] = 1), /mask-0 tokens are not interstitials|is not b's sampled/],
    ["a trainable interstitial", (t) => (t.traces[0].loss_mask[0] = 0), /sampled token #0 has mask 0/],
    ["the prompt", (t) => t.traces[0].prompt_ids.pop(), /prompt_ids are not the captured prompt of a/],
    ["the member list", (t) => (t.traces[0].metadata.completion_ids = ["a", "c"]), /not interstitials of c/],
    ["a dropped trace", (t) => t.traces.pop(), /completion d: its 2 sampled tokens are trainable in no trace/],
    ["a duplicated trace", (t) => t.traces.push(structuredClone(t.traces[1])), /sampled tokens of d are already trainable in trace 1/],
    ["trailing tokens", (t) => (t.traces[1].response_ids.push(5), t.traces[1].loss_mask.push(0), t.traces[1].response_logprobs!.push(0)), /tokens left after the last listed completion/],
    ["lengths", (t) => t.traces[1].loss_mask.pop(), /differ in length/],
  ];
  for (const [what, edit, message] of tamper) {
    it(`fails on a changed ${what}`, () => {
      const s = sess();
      const t = clone(merged(s));
      edit(t);
      const r = verifyTrajectory(t, s);
      expect(r.ok).toBe(false);
      expect(r.errors.join("\n")).toMatch(message);
    });
  }

  it("accepts an unused completion only when the statistics say why", () => {
    const s = sess();
    const t = clone(merged(s));
    t.traces.pop();
    (t.metadata.reconstruction_stats as any).dropped.push({ completion_id: "d", chain: 1, reason: "test" });
    expect(verifyTrajectory(t, s)).toMatchObject({ ok: true, stats: { completions_dropped: 1, completions_trainable: 3 } });
  });

  it("rejects logprobs on a trace whose completion has none aligned", () => {
    const s = sess();
    delete (s.completions[3].response as any).choices[0].logprobs;
    const t = clone(registry.resolve({ strategy: "per_request" }, {}).build(s));
    expect(t.traces[3].response_logprobs).toBeNull();
    t.traces[3].response_logprobs = [-1, -1];
    expect(verifyTrajectory(t, s).errors).toEqual(["trace 3: trace has logprobs but completion d has none aligned"]);
  });
});
