export * from "./errors.ts";
export * from "./subjects.ts";
export * from "./schemas.ts";
export * from "./codec.ts";
