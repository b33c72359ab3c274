/** The `polar` command line. Each command lives in src/cli/commands/<name>.ts. */
import { Command, CommanderError } from "commander";
import { errorMessage, PolarError } from "../protocol/errors.ts";
import { commands } from "./commands/index.ts";

export async function main(argv: string[]): Promise<void> {
  const program = new Command()
    .name("polar")
    .description("Agentic RL rollouts on any harness: run agent CLIs unmodified, capture token-faithful trajectories")
    .option("--log-format <format>", "log lines: auto (readable on a terminal, JSON otherwise), pretty or json", "auto")
    .showHelpAfterError()
    .exitOverride()
    .hook("preAction", (cmd) => {
      const format = cmd.opts().logFormat as string;
      if (!["auto", "pretty", "json"].includes(format)) throw new PolarError("validation", `--log-format must be auto, pretty or json, not ${JSON.stringify(format)}`);
      // Every command's logger reads it (createLogger), so one flag covers them all.
      if (format !== "auto") process.env.POLAR_LOG_FORMAT = format;
    });
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
