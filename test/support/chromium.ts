/**
 * A real browser for a test: Debian's `chromium` (or APPLYGATE_CHROMIUM) driven by playwright-core,
 * which downloads no browser of its own. Loopback only: every request the page makes to another
 * host is refused before it leaves the browser and recorded, so a test can say none was made.
 */
import { execFileSync } from "node:child_process";
import { type Browser, type BrowserContext, chromium } from "playwright-core";

function which(name: string): string | undefined {
  try {
    return execFileSync("sh", ["-c", `command -v ${name}`], { encoding: "utf8" }).trim() || undefined;
  } catch {
    return undefined;
  }
}

/** The browser's executable, or undefined where none is installed. */
export const CHROMIUM =
  process.env.APPLYGATE_CHROMIUM ?? which("chromium") ?? which("chromium-browser") ?? undefined;

if (!CHROMIUM)
  console.warn(
    "NOTICE: no chromium on PATH (nor APPLYGATE_CHROMIUM): the queue dashboard's browser test is SKIPPED. Install Debian's package: apt-get install chromium",
  );

const LOOPBACK = new Set(["127.0.0.1", "[::1]", "localhost"]);

export interface LoopbackBrowser {
  browser: Browser;
  /** A context answering HTTP authentication with these credentials (none: no answer). */
  context(credentials?: { username: string; password: string }): Promise<BrowserContext>;
  /** Requests the pages tried to make to any host but loopback (each refused). */
  offLoopback: string[];
  close(): Promise<void>;
}

export async function launchChromium(): Promise<LoopbackBrowser> {
  if (!CHROMIUM) throw new Error("no chromium");
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    // As root (CI) Chromium's sandbox cannot start. No name is resolved but loopback's.
    args: [
      "--no-sandbox",
      "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1, EXCLUDE [::1]",
    ],
  });
  const offLoopback: string[] = [];
  return {
    browser,
    offLoopback,
    async context(credentials) {
      const ctx = await browser.newContext({
        ...(credentials ? { httpCredentials: credentials } : {}),
        viewport: { width: 1280, height: 720 },
      });
      await ctx.route("**/*", (route) => {
        const url = new URL(route.request().url());
        if (url.protocol === "data:" || LOOPBACK.has(url.hostname)) return route.continue();
        offLoopback.push(route.request().url());
        return route.abort("blockedbyclient");
      });
      return ctx;
    },
    close: () => browser.close(),
  };
}
