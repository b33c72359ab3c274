/** `polar evaluator` as a real process (the CLI entry), for tests that kill or stop it. */
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";

export interface EvaluatorProcess {
  nodeId: string;
  child: ChildProcess;
  stderr(): string;
  /** SIGTERM, then wait for the exit code. */
  stop(): Promise<number | null>;
  exited: Promise<number | null>;
}

const root = fileURLToPath(new URL("../..", import.meta.url));

export async function spawnEvaluator(natsUrl: string, nodeId: string, args: string[] = []): Promise<EvaluatorProcess> {
  const child = spawn(process.execPath, ["bin/polar.js", "evaluator", "--nats", natsUrl, "--node-id", nodeId, ...args], {
    cwd: root,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, POLAR_LOG_LEVEL: process.env.POLAR_TEST_LOG ?? "warn" },
  });
  let err = "";
  child.stderr!.on("data", (d) => (err = (err + d).slice(-20_000)));
  const exited = new Promise<number | null>((r) => child.on("close", r));
  await new Promise<void>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (d) => {
      out += d;
      if (out.includes(`evaluator ${nodeId}:`)) resolve();
    });
    void exited.then(() => reject(new Error(`evaluator ${nodeId} exited early: ${err}`)));
  });
  return {
    nodeId,
    child,
    stderr: () => err,
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      return exited;
    },
  };
}
