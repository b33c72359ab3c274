/**
 * The answer when no playbook rule matches: a short deterministic sentence
 * chosen by the sampling key and the prompt, so the same request gives the
 * same text and different seeds or sessions give different texts.
 */
import type { PromptContext } from "../prompt-context.ts";
import { prng } from "../rng.ts";

const OPENERS = ["Sure.", "Understood.", "Here is my answer.", "Certainly.", "Okay.", "Alright."];
const MIDDLES = [
  "I looked at the request",
  "I considered the question",
  "I went through the task",
  "I read the instructions",
  "I checked what was asked",
];
const ENDINGS = [
  "and there is nothing more to add.",
  "and the answer is complete.",
  "and this should be enough.",
  "and I have no further steps.",
  "and that settles it.",
];

export function defaultText(ctx: PromptContext, key: readonly unknown[]): string {
  const rand = prng(...key, "default-text", ctx.text);
  const pick = (xs: readonly string[]) => xs[Math.floor(rand() * xs.length)];
  return `${pick(OPENERS)} ${pick(MIDDLES)} ${pick(ENDINGS)} (${Math.floor(rand() * 1000)})`;
}
