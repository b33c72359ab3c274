/**
 * The tools cache installer against real npm, with local package tarballs
 * standing in for the registry (so the test needs no network): pinned
 * versions land in one prefix, installed pins are skipped, other packages in
 * the prefix survive, Node is copied, and concurrent installs serialise.
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { register } from "../src/cli/commands/tools.ts";
import { installTools, installedVersion, selectPins } from "../src/tools/install.ts";
import { toolBin, toolsDir, toolsNodeBin } from "../src/tools/paths.ts";
import { TOOL_PINS, type ToolPin } from "../src/tools/pins.ts";

let root: string;
const tarballs = new Map<string, string>();

async function pack(name: string, version: string, bin: string): Promise<void> {
  const dir = join(root, "src", `${name}-${version}`);
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, "package.json"), JSON.stringify({ name, version, bin: { [bin]: "cli.js" } }));
  await writeFile(join(dir, "cli.js"), `#!/usr/bin/env node\nconsole.log(${JSON.stringify(`${bin} ${version}`)});\n`);
  const out = execFileSync("npm", ["pack", "--silent", "--pack-destination", root], { cwd: dir, encoding: "utf8" }).trim().split("\n").at(-1)!;
  tarballs.set(`${name}@${version}`, join(root, out));
}

const spec = (p: ToolPin) => tarballs.get(`${p.pkg}@${p.version}`)!;
const pinA: ToolPin = { name: "tool_a", pkg: "polar-test-tool-a", version: "1.0.0", bin: "tool-a" };
const pinB: ToolPin = { name: "tool_b", pkg: "polar-test-tool-b", version: "2.0.0", bin: "tool-b" };
const pinA2: ToolPin = { ...pinA, version: "1.0.1" };

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "polar-tools-"));
  await pack(pinA.pkg, "1.0.0", pinA.bin);
  await pack(pinA.pkg, "1.0.1", pinA.bin);
  await pack(pinB.pkg, "2.0.0", pinB.bin);
}, 60_000);
afterAll(() => rm(root, { recursive: true, force: true }));

const run = (bin: string) => execFileSync(bin, { encoding: "utf8" }).trim();

describe("installTools", () => {
  it("installs pins into one prefix, skips what is there, keeps other packages, copies node", async () => {
    const dir = join(root, "cache");
    const lines: string[] = [];
    const first = await installTools({ dir, pins: [pinA, pinB], names: ["tool_a"], spec, onProgress: (l) => lines.push(l) });
    expect(first.installed.map((p) => p.name)).toEqual(["tool_a"]);
    expect(first.node).toBe("copied");
    expect(run(toolBin("tool-a", dir))).toBe("tool-a 1.0.0");
    expect(execFileSync(toolsNodeBin(dir), ["--version"], { encoding: "utf8" }).trim()).toBe(process.version);
    expect(lines.some((l) => l.startsWith("npm install --prefix"))).toBe(true);

    const second = await installTools({ dir, pins: [pinA, pinB], names: ["tool-a", "polar-test-tool-b"], spec });
    expect(second.skipped.map((p) => p.name)).toEqual(["tool_a"]);
    expect(second.installed.map((p) => p.name)).toEqual(["tool_b"]);
    expect(second.node).toBe("kept");
    expect(run(toolBin("tool-a", dir))).toBe("tool-a 1.0.0");
    expect(run(toolBin("tool-b", dir))).toBe("tool-b 2.0.0");

    lines.length = 0;
    const third = await installTools({ dir, pins: [pinA, pinB], spec, onProgress: (l) => lines.push(l) });
    expect(third.installed).toEqual([]);
    expect(third.skipped.map((p) => p.name)).toEqual(["tool_a", "tool_b"]);
    expect(lines.some((l) => l.startsWith("npm "))).toBe(false);

    const bumped = await installTools({ dir, pins: [pinA2, pinB], spec });
    expect(bumped.installed.map((p) => p.version)).toEqual(["1.0.1"]);
    expect(run(toolBin("tool-a", dir))).toBe("tool-a 1.0.1");
    expect(await installedVersion(pinB, dir)).toBe("2.0.0");
    const pkg = JSON.parse(await readFile(join(dir, "package.json"), "utf8"));
    expect(Object.keys(pkg.dependencies).sort()).toEqual(["polar-test-tool-a", "polar-test-tool-b"]);
    expect(existsSync(join(dir, ".polar-install.lock"))).toBe(false);
  }, 120_000);

  it("serialises concurrent installs into the same cache", async () => {
    const dir = join(root, "cache-concurrent");
    const [a, b] = await Promise.all([
      installTools({ dir, pins: [pinA], spec, copyNode: false }),
      installTools({ dir, pins: [pinA], spec, copyNode: false }),
    ]);
    expect([a.installed.length, b.installed.length].sort()).toEqual([0, 1]);
    expect(run(toolBin("tool-a", dir))).toBe("tool-a 1.0.0");
  }, 120_000);

  it("names unknown tools with the known ones", () => {
    expect(() => selectPins(["vim"])).toThrow(/unknown tool "vim"; known: claude_code, codex, gemini_cli, qwen_code, opencode, pi/);
    expect(selectPins(["claude", "@openai/codex"]).map((p) => p.name)).toEqual(["claude_code", "codex"]);
  });
});

describe("tools paths and pins", () => {
  it("uses POLAR_TOOLS_DIR, else <repo>/.polar/tools", () => {
    expect(toolsDir({ POLAR_TOOLS_DIR: "/x/y" })).toBe("/x/y");
    expect(toolsDir({})).toMatch(/\/\.polar\/tools$/);
    expect(toolBin("codex", "/c")).toBe("/c/node_modules/.bin/codex");
  });

  it("pins one exact version per harness", () => {
    expect(Object.fromEntries(TOOL_PINS.map((p) => [p.name, `${p.pkg}@${p.version}`]))).toEqual({
      claude_code: "@anthropic-ai/claude-code@2.1.197",
      codex: "@openai/codex@0.171.0",
      gemini_cli: "@google/gemini-cli@0.61.0",
      qwen_code: "@qwen-code/qwen-code@0.15.10",
      opencode: "opencode-ai@1.18.33",
      pi: "@mariozechner/pi-coding-agent@0.73.1",
    });
  });

  it("`polar tools list --json` reports pins against a cache", async () => {
    const program = new Command().exitOverride();
    register(program);
    let out = "";
    const write = process.stdout.write.bind(process.stdout);
    process.stdout.write = ((s: string) => ((out += s), true)) as typeof process.stdout.write;
    try {
      await program.parseAsync(["node", "polar", "tools", "list", "--json", "--dir", join(root, "empty")]);
    } finally {
      process.stdout.write = write;
    }
    const r = JSON.parse(out);
    expect(r.tools).toHaveLength(6);
    expect(r.tools.every((t: { installed: unknown }) => t.installed === null)).toBe(true);
  });
});
