/**
 * Playbooks: the script policy's rules. A rule matches the task instruction
 * (the last user query of the prompt) with a regular expression; its steps are
 * taken one per model call, the step index being the number of assistant turns
 * since that query. `$1`, `$2`, ... and `$<name>` in step text are replaced by
 * the match's groups. See docs/sim.md for the format.
 */
import { readFileSync } from "node:fs";
import { z } from "zod";
import { PolarError, validate } from "../../protocol/index.ts";

const Action = {
  /** Optional reasoning emitted in the <think> block first (when the prompt allows thinking). */
  think: z.string().optional(),
  /** Optional text said before the tool call (or the whole answer of an `answer` step). */
  say: z.string().optional(),
  /** Run a shell command through the offered shell-like tool. */
  run: z.string().optional(),
  /** Write a file through the offered write tool (or the shell tool when none). */
  write: z.strictObject({ path: z.string().min(1), content: z.string() }).optional(),
  /** Answer with this text and end the turn (no tool call). */
  answer: z.string().optional(),
};

const ACTIONS = ["run", "write", "answer"] as const;

const exactlyOneAction = (s: Record<string, unknown>) => ACTIONS.filter((k) => s[k] !== undefined).length === 1;
const oneActionMessage = { message: "a step needs exactly one of run, write, answer (or choose)" };

export const AlternativeSchema = z.strictObject({ p: z.number().positive(), ...Action }).refine(exactlyOneAction, oneActionMessage);

export const StepSchema = z.union([
  z.strictObject({ think: z.string().optional(), choose: z.array(AlternativeSchema).min(1) }),
  z.strictObject(Action).refine(exactlyOneAction, oneActionMessage),
]);

export const RuleSchema = z.strictObject({
  name: z.string().optional(),
  /** A JavaScript regular expression searched in the task instruction. */
  match: z.string().min(1),
  flags: z.string().regex(/^[imsu]*$/).default("i"),
  steps: z.array(StepSchema).min(1),
  /** Answer once the steps are used up. */
  done: z.string().default("Done."),
});

export const PlaybookSchema = z.strictObject({
  name: z.string().default("playbook"),
  rules: z.array(RuleSchema).default([]),
});

export type Step = z.infer<typeof StepSchema>;
export type Alternative = z.infer<typeof AlternativeSchema>;
export type Rule = z.infer<typeof RuleSchema>;
export type Playbook = z.infer<typeof PlaybookSchema>;

export function parsePlaybook(value: unknown, what = "playbook"): Playbook {
  const pb = validate(PlaybookSchema, value, what);
  pb.rules.forEach((r, i) => {
    try {
      new RegExp(r.match, r.flags);
    } catch (err) {
      throw new PolarError("validation", `${what}: rules.${i}.match is not a valid regular expression`, { cause: err });
    }
  });
  return pb;
}

export function loadPlaybook(path: string): Playbook {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new PolarError("validation", `cannot read playbook ${path}: ${(err as Error).message}`, { cause: err });
  }
  return parsePlaybook(raw, `playbook ${path}`);
}

/** The built-in playbook: runs a backquoted command it is asked to run, writes a file it is asked to write. */
export const DEFAULT_PLAYBOOK: Playbook = parsePlaybook({
  name: "default",
  rules: [
    {
      name: "write-file",
      match: "write (?:the text )?`(?<content>[^`]*)` (?:in)?to (?:the |a )?(?:file )?`(?<path>[^`]+)`",
      steps: [{ think: "I will write the file as asked.", write: { path: "$<path>", content: "$<content>" } }],
      done: "done",
    },
    {
      name: "run-command",
      match: "(?:run|execute)[^`]*`(?<cmd>[^`]+)`",
      steps: [{ think: "I will run the command as asked.", run: "$<cmd>" }],
      done: "done",
    },
  ],
});

/** Replaces $1.. and $<name> in a template with the match's groups. */
export function expand(template: string, m: RegExpMatchArray): string {
  return template.replace(/\$(?:(\d+)|<(\w+)>)/g, (_s, num: string | undefined, name: string | undefined) => {
    const v = num !== undefined ? m[Number(num)] : m.groups?.[name as string];
    return v ?? "";
  });
}
