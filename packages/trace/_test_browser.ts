/** Opens a report page in Debian's chromium through playwright-core (the browser check's tools). */
import { createRequire } from "node:module";
import { existsSync } from "node:fs";

export const CHROMIUM = Deno.env.get("CHROMIUM") ?? "/usr/bin/chromium";
const TOOLS = new URL("../../tools/npm/package.json", import.meta.url);

/** Whether a browser and playwright-core are at hand. */
export function haveBrowser(): boolean {
  return existsSync(CHROMIUM) &&
    existsSync(
      new URL("../../tools/npm/node_modules/playwright-core", import.meta.url),
    );
}

// deno-lint-ignore no-explicit-any
export async function launch(): Promise<any> {
  const { chromium } = createRequire(TOOLS)("playwright-core");
  return await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-background-networking",
      "--disable-component-update",
      "--no-first-run",
    ],
  });
}
