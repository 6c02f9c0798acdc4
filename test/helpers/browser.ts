import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { ROOT } from './cli.js';

/** Where the browser tests write a screenshot of every screen (docs/using/dashboard.md). */
export const SCREENSHOTS = join(ROOT, 'test', 'e2e', 'screenshots');

/**
 * Debian's Chromium (AGENTWS_CHROMIUM, else on PATH). `npx playwright install` cannot download browsers on
 * these machines, so when it is missing the test setup runs `install.sh --with-chromium` (root needed).
 */
function chromiumPath(): string {
  const find = () => process.env.AGENTWS_CHROMIUM || spawnSync('sh', ['-c', 'command -v chromium || command -v chromium-browser'], { encoding: 'utf8' }).stdout.trim();
  let path = find();
  if (!path) {
    process.stderr.write('[test] chromium not found: running `bash install.sh --with-chromium --no-npm --no-systemd`\n');
    const r = spawnSync('bash', ['install.sh', '--with-chromium', '--no-npm', '--no-systemd'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
    path = /^AGENTWS_CHROMIUM=(.+)$/m.exec(r.stdout ?? '')?.[1] ?? '';
    if (!path) throw new Error('Chromium is needed for the browser tests: apt-get install chromium (or set AGENTWS_CHROMIUM)');
  }
  return path;
}

/** Headless Chromium with a fresh profile, as the issue asks: no sandbox (root in CI), no GPU, no network of its own. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumPath(),
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/** A full-page screenshot named for the screen. */
export async function shoot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
}
