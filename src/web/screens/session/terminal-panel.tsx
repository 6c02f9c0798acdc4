import { useEffect, useRef, useState } from 'preact/hooks';
import { api, explain } from '../../api';
import type { PaneProps } from './workspace-pane';

/** The terminal module's exports (xterm-module.ts), loaded when the tab first opens. */
interface XtermModule {
  Terminal: new (options: Record<string, unknown>) => XTerm;
  FitAddon: new () => { fit(): void; proposeDimensions(): { cols: number; rows: number } | undefined };
}
interface XTerm {
  cols: number;
  rows: number;
  open(el: HTMLElement): void;
  write(data: string): void;
  writeln(data: string): void;
  focus(): void;
  dispose(): void;
  loadAddon(addon: unknown): void;
  onData(fn: (data: string) => void): { dispose(): void };
  onResize(fn: (size: { cols: number; rows: number }) => void): { dispose(): void };
}

let loading: Promise<XtermModule> | null = null;
function loadXterm(): Promise<XtermModule> {
  const url = document.querySelector<HTMLMetaElement>('meta[name="agentws-terminal-module"]')?.content;
  if (!url) return Promise.reject(new Error('this dashboard build has no terminal module'));
  loading ??= import(/* @vite-ignore */ url) as Promise<XtermModule>;
  return loading;
}

/**
 * xterm.js sizes and colours its rows with <style> elements it writes as text; the dashboard's CSP
 * (style-src 'self', no 'unsafe-inline') keeps those from applying. Their text is copied into a
 * constructed stylesheet (CSSOM from script, which the policy does not govern), kept in step as xterm
 * rewrites them (a resize, a theme). The blocked originals still log a CSP report in the console.
 */
function mirrorStyles(root: HTMLElement): () => void {
  const sheet = new CSSStyleSheet();
  document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
  const sync = () => sheet.replaceSync([...root.querySelectorAll('style')].map((s) => s.textContent ?? '').join('\n'));
  const watch = new MutationObserver(sync);
  watch.observe(root, { subtree: true, childList: true, characterData: true });
  sync();
  return () => {
    watch.disconnect();
    document.adoptedStyleSheets = document.adoptedStyleSheets.filter((s) => s !== sheet);
  };
}

/** Why the service closed it (the WebSocket's reason: "<why>: <sentence>"). */
const closedText = (code: number, reason: string) => (reason ? reason.slice(reason.indexOf(':') + 1).trim() || reason : code === 1006 ? 'the connection was lost' : `closed (${code})`);

/**
 * The Terminal tab: a shell in the person's own sandbox (the agent's), through GET /v1/workspace/terminal.
 * It follows the pane's size; the service closes it on sign-out, after the idle time, when the
 * permission is taken away or the runtime stops, and says why here.
 */
export function TerminalPanel(_props: PaneProps) {
  const box = useRef<HTMLDivElement>(null);
  const [state, setState] = useState<{ kind: 'loading' | 'open' | 'closed' | 'failed'; text?: string }>({ kind: 'loading' });
  const [round, setRound] = useState(0);

  useEffect(() => {
    let cancelled = false;
    const cleanups: Array<() => void> = [];
    setState({ kind: 'loading' });
    (async () => {
      // A WebSocket cannot refresh an expired access cookie itself: a call first does if need be.
      await api('GET', '/auth/me');
      const { Terminal, FitAddon } = await loadXterm();
      if (cancelled || !box.current) return;
      const term = new Terminal({
        cursorBlink: true,
        fontSize: 13,
        fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, monospace',
        scrollback: 5000,
        theme: { background: '#1e1e1e' },
        // What the shell prints is the agent's workspace (hostile): a link it prints (OSC 8) opens only
        // as an http(s) page of its own, never in this window nor with a handle on it.
        linkHandler: { allowNonHttpProtocols: false, activate: (_e: MouseEvent, uri: string) => /^https?:\/\//i.test(uri) && window.open(uri, '_blank', 'noopener,noreferrer') },
      });
      const fit = new FitAddon();
      term.loadAddon(fit);
      cleanups.push(mirrorStyles(box.current));
      term.open(box.current);
      cleanups.push(() => term.dispose());
      fit.fit();
      const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
      const ws = new WebSocket(`${scheme}://${location.host}/v1/workspace/terminal?cols=${term.cols}&rows=${term.rows}`);
      cleanups.push(() => ws.close(1000));
      let opened = false;
      ws.onopen = () => {
        opened = true;
        setState({ kind: 'open' });
        term.focus();
      };
      ws.onmessage = (e) => typeof e.data === 'string' && term.write(e.data);
      ws.onclose = (e) => {
        if (cancelled) return;
        setState(opened ? { kind: 'closed', text: closedText(e.code, e.reason) } : { kind: 'failed', text: 'the terminal could not be opened (your role may not hold agents.terminal, or your runtime cannot start)' });
      };
      const typed = term.onData((d) => ws.readyState === WebSocket.OPEN && ws.send(d));
      // Resizes go as binary messages (text is what is typed).
      const resized = term.onResize(({ cols, rows }) => ws.readyState === WebSocket.OPEN && ws.send(new TextEncoder().encode(JSON.stringify({ type: 'resize', cols, rows }))));
      cleanups.push(() => (typed.dispose(), resized.dispose()));
      const follow = new ResizeObserver(() => fit.fit());
      follow.observe(box.current);
      cleanups.push(() => follow.disconnect());
    })().catch((err) => !cancelled && setState({ kind: 'failed', text: explain(err) }));
    return () => {
      cancelled = true;
      for (const c of cleanups.reverse()) c();
    };
  }, [round]);

  return (
    <div class="terminal-panel">
      <p class="terminal-state hint">
        {state.kind === 'loading' ? 'Opening a terminal in your workspace…' : state.kind === 'open' ? 'Your workspace (/workspace), in your sandbox: what the agent can reach, nothing more.' : `Closed: ${state.text}`}
        {state.kind === 'closed' || state.kind === 'failed' ? (
          <button type="button" class="link" onClick={() => setRound(round + 1)}>
            Open again
          </button>
        ) : null}
      </p>
      <div class="terminal-box" ref={box} data-state={state.kind} />
    </div>
  );
}
