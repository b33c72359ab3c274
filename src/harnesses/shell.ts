/**
 * The `shell` harness: runs `agent.custom_shell.command` as it is, with the
 * proxy environment. The instruction is passed as `POLAR_INSTRUCTION` (and
 * `INSTRUCTION`), never spliced into the command text.
 */
import { z } from "zod";
import { PolarError } from "../protocol/errors.ts";
import type { Harness, HarnessFactory } from "./types.ts";

export const shellHarnessFactory: HarnessFactory = {
  name: "shell",
  configSchema: z.strictObject({}),
  create(_config, { agent }): Harness {
    const shell = agent.custom_shell;
    if (!shell) throw new PolarError("validation", "the shell harness needs agent.custom_shell");
    return {
      name: "shell",
      async setup() {},
      steps(instruction) {
        return [
          {
            command: shell.command,
            cwd: shell.cwd ?? undefined,
            env: { ...(shell.env ?? {}), POLAR_INSTRUCTION: instruction, INSTRUCTION: instruction },
          },
        ];
      },
    };
  },
};
