/**
 * `npm run bench`: runs every bench/*.bench.ts (or those named on the command
 * line, e.g. `npm run bench -- proxy builder`) one after another and prints
 * their figures. Each benchmark measures its comparisons side by side in the
 * same run and reports medians and ratios (these machines are noisy).
 */
import { readdir } from "node:fs/promises";
import { fileURLToPath } from "node:url";

const dir = fileURLToPath(new URL(".", import.meta.url));
const only = process.argv.slice(2);
const files = (await readdir(dir)).filter((f) => f.endsWith(".bench.ts")).sort();
for (const f of files) {
  const name = f.replace(/\.bench\.ts$/, "");
  if (only.length && !only.includes(name)) continue;
  process.stdout.write(`\n=== ${name} ===\n`);
  const mod = (await import(new URL(f, import.meta.url).href)) as { run(): Promise<void> };
  await mod.run();
}
