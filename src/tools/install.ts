/**
 * Installs the pinned harness CLIs into the tools cache (one npm prefix) and
 * copies the running Node binary beside them. Idempotent: a package already
 * installed at its pinned version is skipped, and nothing is run when all are.
 * Concurrent installers (several test workers, two shells) are serialised by
 * a lock directory inside the cache.
 */
import { spawn } from "node:child_process";
import { copyFile, chmod, mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { PolarError } from "../protocol/errors.ts";
import { withInstallLock } from "./lock.ts";
import { toolPackageDir, toolsDir, toolsNodeBin } from "./paths.ts";
import { TOOL_PINS, findPin, type ToolPin } from "./pins.ts";

export interface InstallOptions {
  /** The cache directory; default `toolsDir()`. */
  dir?: string;
  /** Harness, binary or package names; default: every pin. */
  names?: readonly string[];
  /** The pin table (tests pass their own). */
  pins?: readonly ToolPin[];
  /** What npm is given for a pin; default `<pkg>@<version>`. */
  spec?: (pin: ToolPin) => string;
  /** Copy `process.execPath` to `<dir>/node/bin/node`; default true. */
  copyNode?: boolean;
  /** One line of progress at a time (npm's own output included). */
  onProgress?: (line: string) => void;
  signal?: AbortSignal;
}

export interface InstallReport {
  dir: string;
  installed: ToolPin[];
  skipped: ToolPin[];
  node: "copied" | "kept" | "skipped";
  ms: number;
}

/** The version of `pin.pkg` installed in `dir`, or undefined. */
export async function installedVersion(pin: ToolPin, dir: string = toolsDir()): Promise<string | undefined> {
  try {
    const pkg = JSON.parse(await readFile(join(toolPackageDir(pin.pkg, dir), "package.json"), "utf8")) as { version?: string };
    return pkg.version;
  } catch {
    return undefined;
  }
}

/** Resolves the names to pins; unknown names fail with the list of known ones. */
export function selectPins(names: readonly string[] | undefined, pins: readonly ToolPin[] = TOOL_PINS): ToolPin[] {
  if (!names || names.length === 0) return [...pins];
  return names.map((n) => {
    const pin = findPin(n, pins);
    if (!pin) throw new PolarError("validation", `unknown tool ${JSON.stringify(n)}; known: ${pins.map((p) => p.name).join(", ")}`);
    return pin;
  });
}

export async function installTools(opts: InstallOptions = {}): Promise<InstallReport> {
  const started = Date.now();
  const dir = opts.dir ?? toolsDir();
  const pins = selectPins(opts.names, opts.pins);
  const say = opts.onProgress ?? (() => {});
  await mkdir(dir, { recursive: true });
  return withInstallLock(dir, opts.signal, say, async () => {
    const missing: ToolPin[] = [];
    const skipped: ToolPin[] = [];
    for (const pin of pins) {
      const v = await installedVersion(pin, dir);
      if (v === pin.version) {
        skipped.push(pin);
        say(`${pin.name}: ${pin.pkg}@${pin.version} already installed`);
      } else {
        missing.push(pin);
        say(`${pin.name}: installing ${pin.pkg}@${pin.version}${v ? ` (found ${v})` : ""}`);
      }
    }
    if (missing.length) {
      const specs = missing.map(opts.spec ?? ((p) => `${p.pkg}@${p.version}`));
      await runNpm(dir, specs, say, opts.signal);
      for (const pin of missing) {
        const v = await installedVersion(pin, dir);
        if (v !== pin.version) throw new PolarError("internal", `${pin.pkg}: npm finished but version ${v ?? "none"} is installed, not ${pin.version}`);
      }
    }
    const node = opts.copyNode === false ? "skipped" : await copyNode(dir, say);
    const ms = Date.now() - started;
    say(`tools ready in ${dir} (${missing.length} installed, ${skipped.length} already there, ${(ms / 1000).toFixed(1)} s)`);
    return { dir, installed: missing, skipped, node, ms };
  });
}

async function runNpm(dir: string, specs: string[], say: (l: string) => void, signal?: AbortSignal): Promise<void> {
  const args = ["install", "--prefix", dir, "--save-exact", "--no-audit", "--no-fund", "--no-update-notifier", ...specs];
  say(`npm ${args.join(" ")}`);
  const child = spawn("npm", args, { cwd: dir, stdio: ["ignore", "pipe", "pipe"], signal, env: { ...process.env, npm_config_loglevel: "http" } });
  const tail: string[] = [];
  for (const stream of [child.stdout, child.stderr]) {
    createInterface({ input: stream }).on("line", (line) => {
      if (!line.trim()) return;
      tail.push(line);
      if (tail.length > 20) tail.shift();
      say(`  ${line}`);
    });
  }
  const code = await new Promise<number | null>((res, rej) => {
    child.once("error", rej);
    child.once("close", (c) => res(c));
  }).catch((err: unknown) => {
    throw new PolarError(signal?.aborted ? "cancelled" : "internal", `npm install failed to run: ${String(err)}`, { cause: err });
  });
  if (code !== 0) throw new PolarError("internal", `npm install exited with ${code}:\n${tail.join("\n")}`, { details: { specs } });
}

/** Copies the running Node binary into the cache unless the same version is there. */
async function copyNode(dir: string, say: (l: string) => void): Promise<"copied" | "kept"> {
  const target = toolsNodeBin(dir);
  const stamp = join(dir, "node", "VERSION");
  const have = await readFile(stamp, "utf8").catch(() => "");
  if (have.trim() === process.version) {
    say(`node: ${process.version} already in the cache`);
    return "kept";
  }
  await mkdir(dirname(target), { recursive: true });
  const tmp = `${target}.tmp-${process.pid}`;
  await copyFile(process.execPath, tmp);
  await chmod(tmp, 0o755);
  await rename(tmp, target);
  await writeFile(stamp, `${process.version}\n`);
  say(`node: copied ${process.version} to ${target}`);
  return "copied";
}
