/** The `polar` command line. Each command lives in src/cli/commands/<name>.ts. */
import { Command, CommanderError } from "commander";
import { errorMessage, PolarError } from "../protocol/errors.ts";
import { commands } from "./commands/index.ts";

export async function main(argv: string[]): Promise<void> {
  const program = new Command()
    .name("polar")
    .description("Agentic RL rollouts on any harness: run agent CLIs unmodified, capture token-faithful trajectories")
    .showHelpAfterError()
    .exitOverride();
  for (const register of commands) register(program);
  try {
    await program.parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) process.exit(err.exitCode);
    const code = err instanceof PolarError ? err.code : "internal";
    process.stderr.write(`polar: ${code}: ${errorMessage(err)}\n`);
    if (err instanceof PolarError && err.details) process.stderr.write(`${JSON.stringify(err.details, null, 2)}\n`);
    process.exit(1);
  }
}
