import { render } from 'preact';
import { act } from 'preact/test-utils';
import type { ComponentChildren } from 'preact';
import { vi } from 'vitest';

/**
 * Renders dashboard components in-process, in the test DOM (happy-dom), with the API answered by
 * `answers` (path after /v1 → JSON, or an error status with its body): no server, no Chromium. What the
 * browser suite checks end to end, these check by the component, in milliseconds.
 */
export function stubApi(answers: Record<string, unknown | { status: number; body: unknown }>) {
  const calls: string[] = [];
  vi.stubGlobal(
    'fetch',
    vi.fn(async (url: string, init?: RequestInit) => {
      const path = String(url).replace(/^\/v1/, '');
      calls.push(`${init?.method ?? 'GET'} ${path}`);
      const a = answers[path];
      if (a === undefined) return new Response(JSON.stringify({ error: 'not_found', message: `no answer for ${path}` }), { status: 404 });
      if (a && typeof a === 'object' && 'status' in a && 'body' in a) return new Response(JSON.stringify((a as { body: unknown }).body), { status: (a as { status: number }).status });
      return new Response(JSON.stringify(a), { status: 200 });
    }),
  );
  return calls;
}

/** Mounts `ui` in a fresh container and lets its effects and loads settle. */
export async function mount(ui: ComponentChildren): Promise<HTMLElement> {
  const root = document.createElement('div');
  document.body.replaceChildren(root);
  await act(async () => {
    render(ui, root);
  });
  await settle();
  return root;
}

/** Lets pending answers arrive and the renders they cause run. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) {
    await act(async () => {
      await new Promise((r) => setTimeout(r, 0));
    });
  }
}
