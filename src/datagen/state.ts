/**
 * The resumable state of a `polar datagen` run, in `<out>/state.json`:
 * which instances are finished (with their counts) and which were submitted
 * (so a restart attaches to their task instead of submitting it again).
 * Written atomically (temporary file, then rename) after every change.
 */
import { randomBytes } from "node:crypto";
import { readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { ValidationError } from "../protocol/errors.ts";

const Done = z.object({ task_id: z.string(), repo: z.string(), sessions: z.number().int(), accepted: z.number().int() });
export const DatagenState = z.object({
  version: z.literal(1),
  /** Task ids of this run start with it (two runs never share a task). */
  prefix: z.string(),
  submitted: z.record(z.string(), z.string()).default({}),
  done: z.record(z.string(), Done).default({}),
});
export type DatagenState = z.infer<typeof DatagenState>;

export async function loadState(dir: string): Promise<DatagenState> {
  const path = join(dir, "state.json");
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch {
    return { version: 1, prefix: `dg${randomBytes(3).toString("hex")}`, submitted: {}, done: {} };
  }
  const r = DatagenState.safeParse(JSON.parse(text));
  if (!r.success) throw new ValidationError(path, r.error.issues.map((i) => ({ path: i.path.join("."), message: i.message })));
  return r.data;
}

export async function saveState(dir: string, s: DatagenState): Promise<void> {
  const path = join(dir, "state.json");
  await writeFile(`${path}.tmp`, JSON.stringify(s, null, 1));
  await rename(`${path}.tmp`, path);
}
