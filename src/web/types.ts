// Shapes of the API's answers the dashboard reads (SPEC.md; the OpenAPI document at /v1/openapi.json).

export interface Permissions {
  agents: { create: boolean; delete: boolean; configure: boolean; terminal?: boolean; code_host?: boolean; use_templates: string[] | '*' };
  memory: { read_own: boolean; read_team: boolean; read_org: boolean; write: boolean; delete: boolean; share: boolean };
  tools: { allowed: string[] | '*'; denied: string[] };
  /** The models the role may choose; absent in documents older than it: every model. */
  models?: { allowed: string[] | '*' };
  admin: { manage_users: boolean; manage_roles: boolean; manage_templates: boolean; manage_providers: boolean; view_audit_log: boolean; manage_tenant: boolean };
  cost: { monthly_limit_usd?: number; per_request_limit_usd?: number };
}

export interface Me {
  user: { id: string; handle: string; email: string; displayName: string; tenantId: string };
  roles: string[];
  permissions: Permissions;
  /** Acting as the operator in local demo mode, without a sign-in. */
  demo?: boolean;
}

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
