import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BrowserContext } from 'playwright-core';
import { dashboardDir } from '../../src/http/routes/web.routes.js';
import { launchChromium } from '../helpers/browser.js';
import { ROOT } from '../helpers/cli.js';
import { loadAvg } from './agent-bench-utils.js';
import { median, percentile, report } from './bench-utils.js';
import { newSession, setUp } from './in-process-serve.js';


/**
 * The web dashboard, in Debian's headless Chromium against the real app (a real
 * runtime in its sandbox, the scripted model; test/bench/in-process-serve.ts), signed in by cookie:
 * 1. JavaScript shipped: the app's own code and the vendored library (Preact), gzip, from the build's
 *    sizes.json (esbuild's metafile split by input); targets 60 KB and 20 KB.
 * 2. First paint of the sessions screen (30 sessions listed): from navigation start to the list on
 *    screen (the first animation frame after it is in the DOM), p50/p95 over RUNS fresh page loads;
 *    target <= 1 s. Baseline: the same page load of a bare static file of this server (/readyz).
 * 3. A streamed token on screen after its SSE event reaches the page: each `message.part.delta` the
 *    page's EventSource receives is timed to the first animation frame in which its text is in the
 *    transcript, p95 over every delta of TURNS turns; target <= 100 ms. Baseline: from receipt to the
 *    next animation frame (what any rendering costs).
 * 4. The browser test suite (test/e2e) wall time, `vitest --project browser`; target <= 3 min.
 *    Baseline: vitest running one unit test file (its own start-up).
 * Parameters: BENCH_WEB_RUNS (20), BENCH_WEB_TURNS (5), BENCH_WEB_SUITE (1: also time the suite).
 */
const RUNS = Number(process.env.BENCH_WEB_RUNS ?? 20);
const TURNS = Number(process.env.BENCH_WEB_TURNS ?? 5);
const SUITE = (process.env.BENCH_WEB_SUITE ?? '1') !== '0';

// Runs in the page before its own scripts (injected through the DevTools protocol, not subject to the
// page's CSP): times when the session list appears, and every delta's receipt and its first frame on screen.
const PROBE = `(() => {
  const w = window;
  w.__bench = { listAt: null, deltas: [] };
  const pending = [];
  const check = () => requestAnimationFrame(() => {
    const now = performance.now();
    if (w.__bench.listAt === null && document.querySelector('ul[aria-label="Your sessions"] li')) w.__bench.listAt = now;
    const text = document.querySelector('.transcript')?.textContent ?? '';
    for (let i = pending.length - 1; i >= 0; i--) {
      if (text.includes(pending[i].marker)) { pending[i].shown = now; pending.splice(i, 1); }
    }
  });
  new MutationObserver(check).observe(document, { subtree: true, childList: true, characterData: true });
  const Native = w.EventSource;
  w.EventSource = function (url, init) {
    const es = new Native(url, init);
    es.addEventListener('message', (m) => {
      const at = performance.now();
      let e; try { e = JSON.parse(m.data); } catch { return; }
      if (e.type !== 'message.part.delta' || typeof e.properties?.delta !== 'string') return;
      const marker = e.properties.delta.trim();
      if (!/^tok\\d+$/.test(marker)) return;
      const item = { marker, at, frame: 0, shown: 0 };
      requestAnimationFrame(() => { item.frame = performance.now(); });
      pending.push(item);
      w.__bench.deltas.push(item);
    });
    return es;
  };
  w.EventSource.prototype = Native.prototype;
  Object.assign(w.EventSource, { CONNECTING: 0, OPEN: 1, CLOSED: 2 });
})();`;

export async function webBench(): Promise<boolean> {
  console.log(`\n# web dashboard bench — ${new Date().toISOString()} — load average ${loadAvg()}`);
  let ok = true;

  // 1. Size.
  const dir = dashboardDir();
  if (!dir) throw new Error('the dashboard is not built: npm run build');
  const sizes = JSON.parse(readFileSync(join(dir, 'sizes.json'), 'utf8')) as { gzip: number; appGzip: number; vendoredGzip: number; cssGzip: number; bytes: number; terminalGzip?: number };
  ok =
    report(
      'web: JavaScript shipped to the browser (gzip)',
      {
        'app code (KB)': (sizes.appGzip / 1024).toFixed(1),
        'vendored Preact (KB)': (sizes.vendoredGzip / 1024).toFixed(1),
        'whole bundle gzip / raw (KB)': `${(sizes.gzip / 1024).toFixed(1)} / ${(sizes.bytes / 1024).toFixed(1)}`,
        'stylesheet gzip (KB)': (sizes.cssGzip / 1024).toFixed(1),
        'ratio app / budget': `${(sizes.appGzip / (60 * 1024)).toFixed(2)}x`,
        // xterm.js, a module of its own: fetched when a Terminal tab opens, never with the page.
        'terminal module, on opening the tab (KB)': sizes.terminalGzip !== undefined ? (sizes.terminalGzip / 1024).toFixed(1) : 'none',
      },
      { ok: sizes.appGzip <= 60 * 1024 && sizes.vendoredGzip <= 20 * 1024, target: 'app <= 60 KB, vendored <= 20 KB' },
    ) && ok;

  const s = await setUp('web');
  const browser = await launchChromium();
  const signedIn = async (): Promise<BrowserContext> => {
    const context = await browser.newContext();
    await context.addCookies([{ name: 'agentws_access', value: s.token, url: s.url, httpOnly: true, sameSite: 'Lax' }]);
    return context;
  };
  try {
    for (let i = 0; i < 30; i++) await newSession(s, `Session ${i + 1}`);

    // 2. First paint of the sessions screen.
    const paint: number[] = [];
    const base: number[] = [];
    for (let i = 0; i < RUNS + 2; i++) {
      const context = await signedIn();
      const page = await context.newPage();
      await page.addInitScript(PROBE);
      await page.goto(`${s.url}/#/sessions`);
      await page.waitForFunction(() => (globalThis as any).__bench?.listAt != null, null, { timeout: 10_000 });
      const at = await page.evaluate(() => (globalThis as any).__bench.listAt as number);
      const page2 = await context.newPage();
      await page2.goto(`${s.url}/readyz`);
      const bare = await page2.evaluate(() => (globalThis as any).performance.getEntriesByType('navigation')[0].responseEnd as number);
      await context.close();
      if (i < 2) continue; // the first loads warm the server and the browser
      paint.push(at);
      base.push(bare);
    }
    ok =
      report(
        `web: first paint of the sessions screen (30 sessions, ${RUNS} fresh loads, headless Chromium, loopback)`,
        {
          'sessions listed on screen p50 / p95 (ms)': `${median(paint).toFixed(0)} / ${percentile(paint, 95).toFixed(0)}`,
          'baseline: /readyz loaded p50 / p95 (ms)': `${median(base).toFixed(1)} / ${percentile(base, 95).toFixed(1)}`,
          'ratio p95 / baseline p95': `${(percentile(paint, 95) / percentile(base, 95)).toFixed(1)}x`,
        },
        { ok: percentile(paint, 95) <= 1000, target: 'p95 <= 1000 ms' },
      ) && ok;

    // 3. Streamed tokens on screen.
    const context = await signedIn();
    const page = await context.newPage();
    await page.addInitScript(PROBE);
    const sessionId = await newSession(s, 'stream');
    await page.goto(`${s.url}/#/sessions/${sessionId}`);
    await page.getByRole('textbox', { name: 'Message' }).waitFor();
    let n = 0;
    for (let turn = 0; turn < TURNS; turn++) {
      const words = Array.from({ length: 60 }, () => `tok${++n}`);
      s.llm.script([{ text: words.join(' ') }]);
      await page.getByRole('textbox', { name: 'Message' }).fill(`turn ${turn}`);
      await page.keyboard.press('Enter');
      await page.getByText(words.at(-1)!, { exact: false }).waitFor({ timeout: 60_000 });
      await page.waitForFunction(() => !(globalThis as any).document.querySelector('.status'), null, { timeout: 60_000 });
    }
    const items = await page.evaluate(() => (globalThis as any).__bench.deltas as Array<{ at: number; frame: number; shown: number }>);
    const deltas = items.filter((d) => d.shown > 0 && d.frame > 0);
    if (deltas.length < items.length) throw new Error(`${items.length - deltas.length} of ${items.length} streamed tokens never showed on screen`);
    const onScreen = deltas.map((d) => d.shown - d.at);
    const frame = deltas.map((d) => d.frame - d.at);
    ok =
      report(
        `web: a streamed token on screen after its SSE event reaches the page (${TURNS} turns, ${deltas.length} deltas)`,
        {
          'event -> on screen p50 / p95 / max (ms)': `${median(onScreen).toFixed(1)} / ${percentile(onScreen, 95).toFixed(1)} / ${Math.max(...onScreen).toFixed(1)}`,
          'baseline: event -> next frame p50 / p95 (ms)': `${median(frame).toFixed(1)} / ${percentile(frame, 95).toFixed(1)}`,
          'ratio p95 / baseline p95': `${(percentile(onScreen, 95) / Math.max(percentile(frame, 95), 0.1)).toFixed(1)}x`,
        },
        { ok: deltas.length > 0 && percentile(onScreen, 95) <= 100, target: 'p95 <= 100 ms' },
      ) && ok;
  } finally {
    await browser.close().catch(() => {});
    await s.close();
  }

  // 4. The browser suite.
  if (SUITE) {
    const vitest = join(ROOT, 'node_modules', '.bin', 'vitest');
    const time = (args: string[]) => {
      const s = performance.now();
      const r = spawnSync(vitest, ['run', '--config', 'test/vitest.config.ts', ...args], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
      if (r.status !== 0) throw new Error(`vitest ${args.join(' ')} failed:\n${r.stdout}\n${r.stderr}`);
      return (performance.now() - s) / 1000;
    };
    const suite = time(['--project', 'browser']);
    const floor = time(['--project', 'unit', 'test/unit/csrf.test.ts']);
    ok =
      report(
        'web: the browser test suite (vitest --project browser, 2 cores)',
        { 'wall time (s)': suite.toFixed(1), 'baseline: vitest with one unit test file (s)': floor.toFixed(1), ratio: `${(suite / floor).toFixed(1)}x` },
        { ok: suite <= 180, target: '<= 180 s' },
      ) && ok;
  }
  return ok;
}
