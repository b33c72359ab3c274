/**
 * A fresh runtime for evaluation: same spec as the session's, started and
 * prepared with `eval_prepare` (or `prepare` when it is null). A runtime
 * that fails to start or prepare is stopped before the error propagates.
 */
import type { Logger } from "pino";
import { RuntimeSpec } from "../protocol/schemas.ts";
import { errorMessage, PolarError } from "../protocol/errors.ts";
import type { GatewayRegistries } from "../actors/gateway/context.ts";
import { runPrepare } from "../runtimes/prepare.ts";
import type { Runtime, RuntimeContext } from "../runtimes/types.ts";

export interface FreshRuntime {
  runtime: Runtime;
  startMs: number;
  prepareMs: number;
}

export async function startFreshRuntime(
  runtimes: GatewayRegistries["runtimes"],
  specInput: unknown,
  ctx: RuntimeContext,
  opts: { signal: AbortSignal; log: Logger },
): Promise<FreshRuntime> {
  const spec = RuntimeSpec.parse(specInput);
  const runtime = runtimes.resolve({ strategy: spec.backend, config: {} }, { spec, ctx });
  try {
    const t = performance.now();
    await runtime.start();
    const startMs = performance.now() - t;
    const p = performance.now();
    const field = spec.eval_prepare ? "runtime.eval_prepare" : "runtime.prepare";
    await runPrepare(runtime, spec.eval_prepare ?? spec.prepare, opts).catch((err: unknown) => {
      // Name the field, as the in-gateway evaluation runtime does; a timeout or cancel stays what it is.
      if (err instanceof PolarError && (err.code === "timeout" || err.code === "cancelled")) throw err;
      throw new PolarError("runtime", `evaluation runtime failed: ${field} failed in the evaluation runtime: ${errorMessage(err)}`, { cause: err });
    });
    return { runtime, startMs, prepareMs: performance.now() - p };
  } catch (err) {
    await runtime.stop().catch((e) => opts.log.warn({ err: e }, "eval runtime stop failed"));
    throw err;
  }
}
