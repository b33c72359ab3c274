/**
 * The package's library entry as a consumer sees it: `import { PolarClient }
 * from "polar"` from another directory resolves through package.json `exports`
 * to the built dist/ (npm's `prepare` builds it; scripts/test.sh runs
 * `npm run build`), and its types check under NodeNext resolution.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL("..", import.meta.url));

describe("the polar package entry", () => {
  let dir: string;
  beforeAll(async () => {
    expect(existsSync(join(ROOT, "dist/client/index.js")), "dist/ is built (npm run build)").toBe(true);
    dir = await mkdtemp(join(tmpdir(), "polar-consumer-"));
    await mkdir(join(dir, "node_modules"));
    await symlink(ROOT, join(dir, "node_modules/polar"), "dir");
    await writeFile(join(dir, "package.json"), JSON.stringify({ name: "consumer", type: "module", private: true }));
  });
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("imports by name and runs", async () => {
    await writeFile(
      join(dir, "main.mjs"),
      `import { PolarClient, PolarError, grpoAdvantages } from "polar";
const err = await PolarClient.connect({ nats: "nats://127.0.0.1:1" }).catch((e) => e);
console.log(JSON.stringify({ adv: grpoAdvantages([1, 0], false), polar: err instanceof PolarError, code: err.code, retryable: err.retryable }));`,
    );
    const { stdout } = await run(process.execPath, ["main.mjs"], { cwd: dir });
    expect(JSON.parse(stdout)).toEqual({ adv: [0.5, -0.5], polar: true, code: "unavailable", retryable: true });
  });

  it("type-checks a TypeScript consumer", async () => {
    await writeFile(
      join(dir, "main.ts"),
      `import { PolarClient, type Group, type TraceMessage } from "polar";
export async function train(api: string): Promise<number> {
  const client = await PolarClient.connect({ api });
  const handle = await client.submit({ task_id: "t", instruction: "x", agent: { harness: "shell", custom_shell: { command: "true" } } });
  for await (const m of handle.traces()) { const t: TraceMessage = m; void t.trace.loss_mask; }
  const g: Group = await handle.group();
  // @ts-expect-error an advantage is a number (fails if the types resolved to any)
  const wrong: string = g.sessions[0].advantage;
  void wrong;
  return g.sessions.reduce((a, s) => a + s.advantage, 0);
}
`,
    );
    await writeFile(
      join(dir, "tsconfig.json"),
      JSON.stringify({ compilerOptions: { module: "NodeNext", moduleResolution: "NodeNext", target: "ES2022", strict: true, noEmit: true, skipLibCheck: true, types: [] }, files: ["main.ts"] }),
    );
    const tsc = join(ROOT, "node_modules/typescript/bin/tsc");
    const r = await run(process.execPath, [tsc, "-p", "."], { cwd: dir }).catch((e) => e);
    expect(r.stdout ?? "").toBe("");
  });
});
