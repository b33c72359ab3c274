/**
 * A real browser for UI tests: Debian's `chromium` (installed by
 * scripts/test.sh) driven by playwright-core; nothing is downloaded.
 */
import { existsSync } from "node:fs";
import { chromium, type Browser } from "playwright-core";

export const CHROMIUM = process.env.POLAR_CHROMIUM ?? ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => existsSync(p));

export async function launchBrowser(): Promise<Browser> {
  if (!CHROMIUM) throw new Error("chromium is not installed (apt-get install chromium; scripts/test.sh does it)");
  // Root in a container has no user namespaces for Chromium's sandbox; the page is our own.
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
}
