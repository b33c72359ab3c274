/**
 * The keys of a KV bucket, each once. nats.js `keys()` reads the bucket with
 * a consumer that starts at the last value of every key and goes on until it
 * has caught up, so a key written during the listing (a node's heartbeat, a
 * lease renewal) is delivered again: `polar status` once listed a gateway
 * twice that way.
 *
 * A key rewritten while the listing runs can also be missing from it (one CI
 * run listed 299 of 300 keys while every 7th was being rewritten): nats.js
 * ends the listing on the server's pending count. Every caller lists again on
 * its next round (the sweep, the node monitor, `polar status`), and a gone
 * node's leases, which `expireLeases` lists once, are not being rewritten.
 */
import type { KV } from "@nats-io/kv";

export async function kvKeys(kv: KV, filter?: string): Promise<string[]> {
  const seen = new Set<string>();
  for await (const k of await kv.keys(filter)) seen.add(k);
  return [...seen];
}
