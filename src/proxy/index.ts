/** The capturing model proxy: public entry. */
export { startProxy, type ProxyDeps } from "./server.ts";
export type * from "./types.ts";
export type { ApiType } from "./dialect.ts";
