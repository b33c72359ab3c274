/**
 * `polar tools install [names...]`: installs the pinned harness CLIs into the
 * tools cache (`$POLAR_TOOLS_DIR` or `<repo>/.polar/tools`), skipping what is
 * already there at the pinned version. `polar tools list` shows pins and what
 * is installed.
 */
import type { Command } from "commander";
import { installTools, installedVersion } from "../../tools/install.ts";
import { toolBin, toolsDir } from "../../tools/paths.ts";
import { TOOL_PINS } from "../../tools/pins.ts";

export function register(program: Command): void {
  const tools = program.command("tools").description("manage the pinned harness CLIs in the tools cache");
  tools
    .command("install")
    .description(`install pinned harness CLIs (${TOOL_PINS.map((p) => p.name).join(", ")}; default: all)`)
    .argument("[names...]", "harness, binary or package names")
    .option("--dir <dir>", "tools cache directory (default: $POLAR_TOOLS_DIR or <repo>/.polar/tools)")
    .action(async (names: string[], opts: { dir?: string }) => {
      const ac = new AbortController();
      const onSig = () => ac.abort(new Error("interrupted"));
      process.once("SIGINT", onSig);
      try {
        await installTools({ names, dir: opts.dir, signal: ac.signal, onProgress: (l) => process.stderr.write(`${l}\n`) });
      } finally {
        process.off("SIGINT", onSig);
      }
    });
  tools
    .command("list")
    .description("show pinned versions and what is installed")
    .option("--dir <dir>", "tools cache directory")
    .option("--json", "print JSON")
    .action(async (opts: { dir?: string; json?: boolean }) => {
      const dir = opts.dir ?? toolsDir();
      const rows = await Promise.all(
        TOOL_PINS.map(async (p) => ({ ...p, installed: (await installedVersion(p, dir)) ?? null, path: toolBin(p.bin, dir) })),
      );
      if (opts.json) {
        process.stdout.write(`${JSON.stringify({ dir, tools: rows }, null, 2)}\n`);
        return;
      }
      process.stdout.write(`tools cache: ${dir}\n`);
      for (const r of rows) {
        const state = r.installed === r.version ? "ok" : r.installed ? `installed ${r.installed}` : "missing";
        process.stdout.write(`${r.name.padEnd(12)} ${`${r.pkg}@${r.version}`.padEnd(40)} ${state}\n`);
      }
    });
}
