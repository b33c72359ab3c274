/**
 * The learnable policy's parameters: one logit per alternative of every
 * `choose` step of a playbook, keyed `<rule>/<step>` (the rule's name, or its
 * index when unnamed). Initialised to ln(p) of each alternative's weight, so
 * the learnable policy starts out sampling exactly like the script policy.
 * Sampling reads a snapshot of the logits; `set` replaces some or all of
 * them at once (what `POST /admin/weights` does).
 */
import type { Playbook } from "./playbook.ts";

export interface ChoicePoint {
  key: string;
  /** A short description of each alternative (its action), for `GET /admin/weights`. */
  alternatives: string[];
}

export class PolicyWeights {
  readonly #logits = new Map<string, number[]>();
  readonly points: ChoicePoint[] = [];

  constructor(playbook: Playbook) {
    playbook.rules.forEach((rule, r) => {
      rule.steps.forEach((step, s) => {
        if (!("choose" in step) || !step.choose) return;
        const key = `${rule.name ?? r}/${s}`;
        const total = step.choose.reduce((a, c) => a + c.p, 0);
        this.#logits.set(key, step.choose.map((c) => Math.log(c.p / total)));
        this.points.push({ key, alternatives: step.choose.map((c) => c.run ?? c.answer ?? (c.write ? `write ${c.write.path}` : "")) });
      });
    });
  }

  static key(ruleName: string | undefined, ruleIndex: number, step: number): string {
    return `${ruleName ?? ruleIndex}/${step}`;
  }

  logits(key: string): readonly number[] | undefined {
    return this.#logits.get(key);
  }

  /** Log-softmax of the key's logits (log-probabilities of its alternatives). */
  logProbs(key: string): number[] | undefined {
    const l = this.#logits.get(key);
    if (!l) return undefined;
    const m = Math.max(...l);
    const lse = m + Math.log(l.reduce((a, x) => a + Math.exp(x - m), 0));
    return l.map((x) => x - lse);
  }

  /** Every key's logits. */
  snapshot(): Record<string, number[]> {
    return Object.fromEntries([...this.#logits].map(([k, v]) => [k, [...v]]));
  }

  /** Validates all entries first, then replaces them; returns the problems (empty when applied). */
  set(update: Record<string, unknown>): string[] {
    const problems: string[] = [];
    for (const [k, v] of Object.entries(update)) {
      const cur = this.#logits.get(k);
      if (!cur) problems.push(`${k}: no such choice point (known: ${[...this.#logits.keys()].join(", ") || "none"})`);
      else if (!Array.isArray(v) || v.length !== cur.length) problems.push(`${k}: must be an array of ${cur.length} logits`);
      else if (!v.every((x) => typeof x === "number" && Number.isFinite(x) && Math.abs(x) <= 1e6)) problems.push(`${k}: logits must be finite numbers within ±1e6`);
    }
    if (problems.length) return problems;
    for (const [k, v] of Object.entries(update)) this.#logits.set(k, [...(v as number[])]);
    return [];
  }
}
