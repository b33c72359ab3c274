/** `session_completed`: reward 1.0 when the trajectory COMPLETED, else 0.0. */
import { z } from "zod";
import type { EvaluatorFactory } from "./types.ts";

export const sessionCompletedFactory: EvaluatorFactory = {
  name: "session_completed",
  configSchema: z.strictObject({}),
  create() {
    return {
      name: "session_completed",
      async evaluate({ trajectory }) {
        const reward = trajectory.status === "COMPLETED" ? 1 : 0;
        return {
          outcome_reward: reward,
          trace_rewards: null,
          outcome_reward_components: null,
          trace_reward_components: null,
          metadata: { mode: "session_completed", resolved: reward === 1 },
        };
      },
    };
  },
};
