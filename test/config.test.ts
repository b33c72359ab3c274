import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { gatewayOptionsFrom, loadConfig } from "../src/app/config.ts";
import type { ValidationError } from "../src/protocol/errors.ts";

describe("config", () => {
  it("parses the example config and maps it to gateway options", async () => {
    const c = await loadConfig(fileURLToPath(new URL("../config/polar.example.json", import.meta.url)));
    expect(Object.isFrozen(c.gateway.proxy)).toBe(true);
    const g = gatewayOptionsFrom(c);
    expect(g.proxy.upstreams).toEqual(["http://127.0.0.1:8000"]);
    expect(g.limits.maxRunWorkers).toBe(2);
  });

  it("refuses unknown keys with their path", async () => {
    const dir = await mkdtemp(join(tmpdir(), "polar-cfg-"));
    const p = join(dir, "c.json");
    await writeFile(p, JSON.stringify({ gateway: { max_run_workerz: 3, proxy: { flavor: "tgi" } } }));
    const err = (await loadConfig(p).catch((e) => e)) as ValidationError;
    expect(err.code).toBe("validation");
    expect(err.message).toMatch(/gateway/);
    expect(err.issues.map((i) => i.path)).toEqual(expect.arrayContaining(["gateway", "gateway.proxy.flavor"]));
  });
});

describe("example tasks and playbooks", () => {
  it("every config/tasks/*.json is a valid task for the built-in registries", async () => {
    const { readdir, readFile } = await import("node:fs/promises");
    const { TaskRequest } = await import("../src/protocol/schemas.ts");
    const { createRegistries, specChecker } = await import("../src/app/registries.ts");
    const check = specChecker(createRegistries());
    const dir = fileURLToPath(new URL("../config/tasks/", import.meta.url));
    const files = (await readdir(dir)).filter((f) => f.endsWith(".json"));
    expect(files.length).toBeGreaterThanOrEqual(8);
    for (const f of files) {
      const task = TaskRequest.parse(JSON.parse(await readFile(join(dir, f), "utf8")));
      expect(() => check(task), f).not.toThrow();
    }
  });
});
