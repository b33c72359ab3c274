/**
 * Optional forwarding of pause/resume to the inference engines themselves,
 * once the gateway's own calls have drained (so the engine is idle while the
 * trainer swaps weights):
 * - `vllm`: `POST /pause?mode=keep` and `POST /resume` (vLLM's RL endpoints,
 *   served with VLLM_SERVER_DEV_MODE=1);
 * - `sglang`: `POST /pause_generation` and `POST /continue_generation`;
 * - `sim`: `POST /admin/pause` and `POST /admin/resume`.
 * A failure is reported per engine in the node's reply, never thrown: the
 * proxy's own gate already holds every call.
 */
import { request } from "undici";
import { errorMessage } from "../../protocol/errors.ts";

export const ENGINE_PAUSE_KINDS = ["none", "vllm", "sglang", "sim"] as const;
export type EnginePauseKind = (typeof ENGINE_PAUSE_KINDS)[number];

const PATHS: Record<Exclude<EnginePauseKind, "none">, { pause: string; resume: string }> = {
  vllm: { pause: "/pause?mode=keep", resume: "/resume" },
  sglang: { pause: "/pause_generation", resume: "/continue_generation" },
  sim: { pause: "/admin/pause", resume: "/admin/resume" },
};

export interface EngineOutcome {
  url: string;
  ok: boolean;
  status: number | null;
  error: string | null;
}

/** The engine's base URL: the upstream URL without a trailing `/v1`. */
export function engineBase(upstream: string): string {
  return upstream.replace(/\/+$/, "").replace(/\/v1$/, "");
}

export async function forwardEngines(
  kind: EnginePauseKind,
  upstreams: readonly string[],
  op: "pause" | "resume",
  timeoutMs = 30_000,
): Promise<EngineOutcome[]> {
  if (kind === "none") return [];
  const path = PATHS[kind][op];
  return Promise.all(
    upstreams.map(async (u): Promise<EngineOutcome> => {
      const url = engineBase(u) + path;
      try {
        const res = await request(url, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: "{}",
          headersTimeout: timeoutMs,
          bodyTimeout: timeoutMs,
        });
        const text = await res.body.text();
        const ok = res.statusCode >= 200 && res.statusCode < 300;
        return { url, ok, status: res.statusCode, error: ok ? null : text.slice(0, 500) };
      } catch (err) {
        return { url, ok: false, status: null, error: errorMessage(err) };
      }
    }),
  );
}
