import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import type { Me } from '../../types';
import { ChangesPanel } from './changes-panel';
import { FilesPanel } from './files-panel';
import { TerminalPanel } from './terminal-panel';

/** What every tab of the workspace pane is given by the chat it sits beside. */
export interface PaneProps {
  me: Me;
  sessionId: string;
  /** A turn of this session is running now. */
  running: boolean;
  /** Counts the session's turns that ended while the chat was open: a tab reloads what a turn changes. */
  turnsEnded: number;
}

interface Tab {
  id: string;
  label: string;
  /** Whether the person's role may use it. */
  shown: (me: Me) => boolean;
  render: (p: PaneProps) => VNode;
}

/**
 * The tabs beside a session's chat, each the person's own workspace from one side. Each tab lives in a
 * file of its own (its component and its calls) and adds one entry here.
 */
const TABS: Tab[] = [
  // A role without agents.create has no agent, so no workspace.
  { id: 'files', label: 'Files', shown: (me) => me.permissions.agents.create, render: (p) => <FilesPanel {...p} /> },
  { id: 'terminal', label: 'Terminal', shown: (me) => me.permissions.agents.terminal === true, render: (p) => <TerminalPanel {...p} /> },
  { id: 'changes', label: 'Changes', shown: () => true, render: (p) => <ChangesPanel {...p} /> },
];

/** The pane beside the chat: one tab open at a time, closed by default on a narrow screen. */
export function WorkspacePane(props: PaneProps) {
  const tabs = TABS.filter((t) => t.shown(props.me));
  const [open, setOpen] = useState<string | null>(null);
  if (!tabs.length) return null;
  const current = tabs.find((t) => t.id === open) ?? null;
  return (
    <aside class={`workspace-pane ${current ? 'open' : ''}`} aria-label="Your workspace">
      <div class="pane-tabs" role="tablist">
        {tabs.map((t) => (
          <button type="button" role="tab" aria-selected={t.id === current?.id} class={t.id === current?.id ? 'on' : ''} onClick={() => setOpen(t.id === current?.id ? null : t.id)} key={t.id}>
            {t.label}
          </button>
        ))}
      </div>
      {current ? <div class="pane-body" role="tabpanel">{current.render(props)}</div> : null}
    </aside>
  );
}
