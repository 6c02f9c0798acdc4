/**
 * Polls until a condition holds: `check` is called at once, then every `intervalMs`, until it returns a
 * value (anything but undefined, null or false), which is resolved; after `timeoutMs` it rejects, naming
 * `what` (a function: described at the time of failure, e.g. with the last state seen). Runner-free:
 * the benchmarks wait with it too (a vitest `expect.poll` needs a test).
 */
export async function waitUntil<T>(
  what: string | (() => string),
  check: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  options: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const { timeoutMs = 30_000, intervalMs = 50 } = options;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== null && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === 'function' ? what() : what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
