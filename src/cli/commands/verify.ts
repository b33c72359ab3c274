/**
 * `polar verify FILE [--session SESSION.json]`: proves a trajectory against
 * its captured session (builders/verify.ts). FILE is a SessionResult (which
 * carries both `trajectory` and `completion_session`), or a Trajectory with
 * `--session`. Prints the report as JSON; exits 1 when the proof fails.
 */
import type { Command } from "commander";
import { normalizeSession } from "../../builders/normalize.ts";
import { verifyTrajectory } from "../../builders/verify.ts";
import { ValidationError } from "../../protocol/errors.ts";
import { validate } from "../../protocol/codec.ts";
import { Trajectory } from "../../protocol/schemas.ts";
import { readJson } from "./build.ts";

export function register(program: Command): void {
  program
    .command("verify")
    .description("prove that every trainable token of a trajectory was sampled, with its logprob, in the captured session")
    .argument("<file>", "SessionResult JSON, or a Trajectory JSON with --session; - for stdin")
    .option("--session <file>", "the CompletionSession the trajectory was built from")
    .action(async (file: string, o: { session?: string }) => {
      const body = (await readJson(file, "trajectory")) as Record<string, unknown> | null;
      const isResult = body !== null && typeof body === "object" && "trajectory" in body;
      const rawTrajectory = isResult ? body.trajectory : body;
      const rawSession = o.session ? await readJson(o.session, "session") : isResult ? body.completion_session : undefined;
      if (rawSession == null) {
        throw new ValidationError("verify input", [
          { path: "completion_session", message: "missing: pass a SessionResult that carries it, or --session FILE" },
        ]);
      }
      const report = verifyTrajectory(validate(Trajectory, rawTrajectory, "trajectory"), normalizeSession(rawSession));
      process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
      if (!report.ok) process.exitCode = 1;
    });
}
