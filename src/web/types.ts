// Shapes the dashboard reads: the signed-in person's (from the API's schemas, wire.ts) and the runtime's
// events and messages, relayed as opencode sends them (SPEC.md "Events"; no schema of ours describes them).
import type { Me, Permissions } from './wire.js';
export type { Me, Permissions };

export interface Part {
  id: string;
  messageID?: string;
  type: string;
  text?: string;
  tool?: string;
  callID?: string;
  state?: { status?: string; input?: any; output?: string; error?: string; title?: string; metadata?: any };
  [k: string]: unknown;
}

export interface MessageInfo {
  id: string;
  role: 'user' | 'assistant';
  cost?: number;
  tokens?: { input?: number; output?: number };
  error?: { name?: string; data?: { message?: string }; message?: string };
  time?: { created?: number; completed?: number };
  /** The model an answer ran on: "<provider>/<model id>" (transcript), the runtime's model id (stream). */
  model?: string;
  modelID?: string;
}

export interface PendingPermission {
  id: string;
  sessionId: string;
  permission: string;
  patterns: string[];
  askedAt: string;
}

/** One event of a session stream (SPEC.md "Events"): what each SSE message's data holds. */
export interface StreamEvent {
  id: string;
  type: string;
  properties: any;
}
