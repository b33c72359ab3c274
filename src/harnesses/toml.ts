/**
 * A minimal TOML writer for Codex's config.toml: strings, numbers, booleans,
 * arrays of those, and nested tables. JSON string escapes are valid TOML
 * basic-string escapes, so strings are written with JSON.stringify.
 */
import { PolarError } from "../protocol/errors.ts";

export type TomlValue = string | number | boolean | TomlValue[] | TomlTable;
export interface TomlTable {
  [key: string]: TomlValue | undefined;
}

const BARE_KEY = /^[A-Za-z0-9_-]+$/;

function key(k: string): string {
  return BARE_KEY.test(k) ? k : JSON.stringify(k);
}

function isTable(v: unknown): v is TomlTable {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function scalar(v: TomlValue, path: string): string {
  if (typeof v === "string") return JSON.stringify(v);
  if (typeof v === "boolean") return String(v);
  if (typeof v === "number") {
    if (!Number.isFinite(v)) throw new PolarError("validation", `${path}: TOML numbers must be finite`);
    return String(v);
  }
  if (Array.isArray(v)) return `[${v.map((x, i) => scalar(x, `${path}[${i}]`)).join(", ")}]`;
  return `{ ${Object.entries(v)
    .filter(([, x]) => x !== undefined)
    .map(([k, x]) => `${key(k)} = ${scalar(x as TomlValue, `${path}.${k}`)}`)
    .join(", ")} }`;
}

/** Top-level keys first, then one `[a.b]` section per nested table. */
export function toToml(table: TomlTable, prefix: string[] = []): string {
  const lines: string[] = [];
  const sections: string[] = [];
  for (const [k, v] of Object.entries(table)) {
    if (v === undefined) continue;
    if (isTable(v)) {
      const path = [...prefix, k];
      const body = toToml(v, path);
      sections.push(`[${path.map(key).join(".")}]\n${body}`);
    } else {
      lines.push(`${key(k)} = ${scalar(v, [...prefix, k].join("."))}`);
    }
  }
  return [lines.join("\n"), ...sections].filter((s) => s.length > 0).join("\n\n") + "\n";
}
