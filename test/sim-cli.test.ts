/**
 * `polar sim` as a process: prints its URL, serves, and exits cleanly on
 * SIGTERM. The command is run through a two-line entry that registers only
 * this command, so the test does not depend on the CLI's wiring.
 */
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

const dir = mkdtempSync(join(tmpdir(), "sim-cli-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("polar sim command", () => {
  it("serves until SIGTERM with the given options", async () => {
    const command = pathToFileURL(fileURLToPath(new URL("../src/cli/commands/sim.ts", import.meta.url))).href;
    const commander = pathToFileURL(createRequire(import.meta.url).resolve("commander")).href;
    const entry = join(dir, "entry.mts");
    writeFileSync(
      entry,
      `import { Command } from ${JSON.stringify(commander)};\nimport { register } from ${JSON.stringify(command)};\nconst p = new Command("polar"); register(p); await p.parseAsync(process.argv);\n`,
    );
    const child = spawn(process.execPath, ["--import", "tsx", entry, "sim", "--port", "0", "--policy", "random", "--slots", "2", "--seed", "3", "--log-level", "silent"], {
      cwd: fileURLToPath(new URL("..", import.meta.url)),
      stdio: ["ignore", "pipe", "pipe"],
    });
    const exited = new Promise<number | null>((r) => child.on("close", r));
    let stderr = "";
    child.stderr.on("data", (d) => (stderr += d));
    const url = await new Promise<string>((resolve, reject) => {
      let out = "";
      child.stdout.on("data", (d) => {
        out += d;
        const m = out.match(/^(http:\/\/127\.0\.0\.1:\d+)\n/);
        if (m) resolve(m[1]);
      });
      child.on("close", () => reject(new Error(`exited early: ${stderr}`)));
    });
    const r = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }], max_tokens: 12, return_token_ids: true }),
    });
    const body = (await r.json()) as { choices: Array<{ token_ids: number[] }> };
    expect(body.choices[0].token_ids).toHaveLength(12);
    const metrics = (await (await fetch(`${url}/metrics?format=json`)).json()) as { slots: number };
    expect(metrics.slots).toBe(2);
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
  });
});
