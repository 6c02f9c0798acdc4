import { Window } from 'happy-dom';

/**
 * The test DOM (happy-dom) as the browser's globals, for the dashboard's components in-process; `remove`
 * puts back what was there (the test files share their worker's process: vitest's isolate is off).
 */
export function installDom(): { remove: () => void } {
  const window = new Window({ url: 'http://127.0.0.1/' });
  const names = ['window', 'document', 'navigator', 'location', 'localStorage', 'sessionStorage', 'Node', 'Element', 'HTMLElement', 'Text', 'Event', 'CustomEvent', 'requestAnimationFrame', 'cancelAnimationFrame', 'getComputedStyle', 'confirm', 'history'] as const;
  const g = globalThis as Record<string, unknown>;
  const before = new Map(names.map((n) => [n, Object.getOwnPropertyDescriptor(g, n)]));
  const w = window as unknown as Record<string, unknown>;
  for (const n of names) Object.defineProperty(g, n, { value: typeof w[n] === 'function' && /^[a-z]/.test(n) ? (w[n] as (...a: unknown[]) => unknown).bind(window) : w[n], configurable: true, writable: true });
  return {
    remove() {
      for (const [n, d] of before) {
        if (d) Object.defineProperty(g, n, d);
        else delete g[n];
      }
      void window.happyDOM.close();
    },
  };
}
