/** The library entry of the package: `import { PolarClient } from "polar"`. */
export { PolarClient, type ConnectOptions } from "./client.ts";
export { TaskHandle, type GroupOptions } from "./handle.ts";
export { grpoAdvantages, buildGroup, sessionReward } from "./grpo.ts";
export type { Group, GroupSession, ResultMessage, StreamOptions, TraceMessage } from "./types.ts";
export { PolarError, ValidationError, ERROR_CODES, isPolarError, type ErrorCode, type WireError } from "../protocol/errors.ts";
export type { SessionResult, SessionStatus, TaskRequest, TaskRequestInput, TaskStatus, Trace } from "../protocol/schemas.ts";
