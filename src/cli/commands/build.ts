/**
 * `polar build --strategy NAME [--config JSON] SESSION.json`: rebuilds a
 * Trajectory from a stored CompletionSession (ours, the reference's JSON
 * shape, or a SessionResult carrying one) and prints it as JSON. `-` reads stdin.
 */
import type { Command } from "commander";
import { readFile } from "node:fs/promises";
import { createBuilderRegistry } from "../../builders/registry.ts";
import { normalizeSession } from "../../builders/normalize.ts";
import { ValidationError } from "../../protocol/errors.ts";

export function register(program: Command): void {
  program
    .command("build")
    .description("rebuild a trajectory from a captured completion session and print it as JSON")
    .argument("<session>", "session JSON file (CompletionSession, reference shape, or SessionResult); - for stdin")
    .requiredOption("--strategy <name>", "builder name (per_request, prefix_merging, or a registered one)")
    .option("--config <json>", "builder config as a JSON object", "{}")
    .option("--compact", "print JSON on one line")
    .action(async (file: string, o: { strategy: string; config: string; compact?: boolean }) => {
      const session = normalizeSession(await readJson(file, "session"));
      const builder = createBuilderRegistry().resolve({ strategy: o.strategy, config: parseJsonOption(o.config, "--config") }, {});
      const trajectory = builder.build(session);
      process.stdout.write(`${JSON.stringify(trajectory, null, o.compact ? undefined : 2)}\n`);
    });
}

/** Reads and parses a JSON file (`-` = stdin); a bad file is a ValidationError naming it. */
export async function readJson(file: string, what: string): Promise<unknown> {
  const text = file === "-" ? await readStdin() : await readFile(file, "utf8");
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ValidationError(what, [{ path: file, message: "is not valid JSON" }], { cause: err });
  }
}

export function parseJsonOption(text: string, flag: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ValidationError("option", [{ path: flag, message: "is not valid JSON" }], { cause: err });
  }
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}
