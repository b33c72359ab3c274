/**
 * `polar sim`: runs the inference simulator (vLLM/SGLang-compatible, Qwen3
 * template and tokenizer, scripted or random policy) until SIGINT/SIGTERM.
 */
import type { Command } from "commander";
import { startSim } from "../../sim/server.ts";
import { createLogger } from "../../util/log.ts";
import { untilSignal } from "../common.ts";

interface SimFlags {
  port: number;
  host: string;
  model?: string;
  playbook?: string;
  policy?: "script" | "random" | "learnable";
  slots?: number;
  ttftMs?: number;
  perTokenMs?: number;
  prefillMsPerToken?: number;
  batchSlowdown?: number;
  seed?: number;
  varyUnkeyed?: boolean;
  maxModelLen?: number;
  logLevel?: string;
}

export function register(program: Command): void {
  program
    .command("sim")
    .description("run the inference simulator: answers like vLLM serving Qwen3, with a scripted or random policy (no model weights)")
    .option("--port <port>", "port (0: any free port)", Number, 8000)
    .option("--host <host>", "address to listen on", "127.0.0.1")
    .option("--model <name>", "served model name (default Qwen/Qwen3-8B)")
    .option("--playbook <file>", "playbook JSON for the script policy (default: the built-in playbook)")
    .option("--policy <name>", "default policy: script, random or learnable (choose logits set by POST /admin/weights)")
    .option("--slots <n>", "concurrent generation slots", Number)
    .option("--ttft-ms <ms>", "time to first token", Number)
    .option("--per-token-ms <ms>", "delay per generated token", Number)
    .option("--prefill-ms-per-token <ms>", "extra time to first token per prompt token", Number)
    .option("--batch-slowdown <f>", "per-token delay grows by this fraction per other running request", Number)
    .option("--seed <n>", "server seed", Number)
    .option("--vary-unkeyed", "requests without seed or session identity sample by arrival (identical sessions diverge)")
    .option("--max-model-len <n>", "maximum context length (prompt + completion)", Number)
    .option("--log-level <level>", "log level", "info")
    .action(async (o: SimFlags) => {
      const log = createLogger({ level: o.logLevel, name: "polar-sim" });
      const sim = await startSim({
        log,
        host: o.host,
        port: o.port,
        modelName: o.model,
        playbookPath: o.playbook,
        policy: o.policy,
        slots: o.slots,
        ttftMs: o.ttftMs,
        perTokenMs: o.perTokenMs,
        prefillMsPerToken: o.prefillMsPerToken,
        batchSlowdown: o.batchSlowdown,
        seed: o.seed,
        unkeyed: o.varyUnkeyed ? "arrival" : undefined,
        maxModelLen: o.maxModelLen,
      });
      process.stdout.write(`${sim.url}\n`);
      await untilSignal();
      await sim.stop();
    });
}
