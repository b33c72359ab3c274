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
