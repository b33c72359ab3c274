/**
 * The script policy: follows a playbook rule matched against the task
 * instruction, one step per call, mapping each step onto the offered tools.
 * A step with alternatives samples one (seeded by the request's sampling key
 * and the step index); the answer's total log-probability is ln(p) of the
 * sampled alternative, and 0 for a deterministic step.
 */
import type { PromptContext } from "../prompt-context.ts";
import { pickWeighted, uniform } from "../rng.ts";
import { defaultText } from "./default-text.ts";
import { expand, type Alternative, type Playbook, type Rule, type Step } from "./playbook.ts";
import { findShellTool, findWriteTool, shellCall, writeCall, writeCommand } from "./tools.ts";
import type { Policy, SampleRequest, StructuredOutput, ToolCallOut } from "./types.ts";
import { PolicyWeights } from "./weights.ts";

type Action = Omit<Alternative, "p">;

/**
 * With `weights` (the learnable policy) a `choose` step samples from the
 * softmax of its current logits instead of the playbook's `p`, and the
 * answer's log-probability is that alternative's log-softmax.
 */
export function scriptPolicy(playbook: Playbook, weights?: PolicyWeights): Policy {
  const rules = playbook.rules.map((rule, index) => ({ rule, index, re: new RegExp(rule.match, rule.flags) }));
  return {
    name: weights ? "learnable" : "script",
    sample(req: SampleRequest): StructuredOutput {
      for (const { rule, index, re } of rules) {
        const m = req.ctx.query.match(re) ?? req.ctx.userText.match(re);
        if (m) return followRule(rule, m, req, weights && ((s: number) => weights.logProbs(PolicyWeights.key(rule.name, index, s))));
      }
      return { kind: "structured", content: defaultText(req.ctx, req.key), toolCalls: [], logprob: 0 };
    },
  };
}

type LogProbsOf = (step: number) => number[] | undefined;

function followRule(rule: Rule, m: RegExpMatchArray, req: SampleRequest, logProbsOf?: LogProbsOf): StructuredOutput {
  const { ctx } = req;
  if (ctx.step >= rule.steps.length) return answer(ctx, expand(rule.done, m), undefined, 0);
  const { action, logprob } = resolveStep(rule.steps[ctx.step], req, logProbsOf?.(ctx.step));
  const think = action.think === undefined ? undefined : expand(action.think, m);
  const say = action.say === undefined ? "" : expand(action.say, m);
  if (action.answer !== undefined) return answer(ctx, expand(action.answer, m), think, logprob);
  const call = toolCall(ctx, action, m);
  if (!call) return answer(ctx, fallbackText(action, m), think, logprob);
  return { kind: "structured", think: ctx.thinking ? think : undefined, content: say, toolCalls: [call], logprob };
}

function resolveStep(step: Step, req: SampleRequest, logProbs?: number[]): { action: Action; logprob: number } {
  if (!("choose" in step) || step.choose === undefined) return { action: step as Action, logprob: 0 };
  const u = uniform(...req.key, "choose", req.ctx.query, req.ctx.step);
  const { index, p } = pickWeighted(logProbs ? logProbs.map(Math.exp) : step.choose.map((a) => a.p), u);
  const alt = step.choose[index];
  return { action: { ...alt, think: alt.think ?? step.think }, logprob: logProbs ? logProbs[index] : Math.log(p) };
}

function toolCall(ctx: PromptContext, action: Action, m: RegExpMatchArray): ToolCallOut | undefined {
  const shell = findShellTool(ctx.tools);
  if (action.run !== undefined) return shell && shellCall(shell, expand(action.run, m));
  if (action.write === undefined) return undefined;
  const path = expand(action.write.path, m);
  const content = expand(action.write.content, m);
  const writer = findWriteTool(ctx.tools);
  if (writer) return writeCall(writer, path, content);
  return shell && shellCall(shell, writeCommand(path, content));
}

/** What the model says when the step needs a tool the request does not offer. */
function fallbackText(action: Action, m: RegExpMatchArray): string {
  if (action.run !== undefined) return `I cannot run commands here. The command would be:\n\n    ${expand(action.run, m)}`;
  return `I cannot write files here. The file ${expand(action.write?.path ?? "", m)} would contain:\n\n${expand(action.write?.content ?? "", m)}`;
}

function answer(ctx: PromptContext, content: string, think: string | undefined, logprob: number): StructuredOutput {
  return { kind: "structured", think: ctx.thinking ? think : undefined, content, toolCalls: [], logprob };
}
