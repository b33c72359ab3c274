/**
 * The dashboard's static assets, shipped in this repository (no CDN, nothing
 * fetched at run time): a fixed list of files, read once and kept in memory.
 */
import { readFile } from "node:fs/promises";
import type { ServerResponse } from "node:http";

const TYPES: Record<string, string> = {
  "index.html": "text/html; charset=utf-8",
  "app.js": "text/javascript; charset=utf-8",
  "views.js": "text/javascript; charset=utf-8",
  "trace-view.js": "text/javascript; charset=utf-8",
  "charts.js": "text/javascript; charset=utf-8",
  "app.css": "text/css; charset=utf-8",
};

const cache = new Map<string, Buffer>();

/** Serves `/` and `/assets/<name>`; returns false for any other path. */
export async function serveAsset(path: string, res: ServerResponse): Promise<boolean> {
  const name = path === "/" ? "index.html" : path.startsWith("/assets/") ? path.slice("/assets/".length) : "";
  const type = TYPES[name];
  if (!type) return false;
  let body = cache.get(name);
  if (!body) {
    body = await readFile(new URL(`./assets/${name}`, import.meta.url));
    cache.set(name, body);
  }
  res.writeHead(200, { "content-type": type, "content-length": body.length, "cache-control": "no-cache" });
  res.end(body);
  return true;
}
