// The dashboard's calls for a git host's webhook (codehost-admin.routes.ts), beside api.ts.
import { api } from './api.js';
import type { Webhook, Delivery } from './wire.js';
export type { Webhook, Delivery };

export type CodeHostKind = 'github' | 'gitlab' | 'gitea';

const path = (host: string) => `/admin/connectors/git/${encodeURIComponent(host)}/webhook`;

export const getWebhook = (host: string) => api<Webhook>('GET', path(host));
export const updateWebhook = (host: string, change: Partial<Pick<Webhook, 'mention' | 'label' | 'repos' | 'enabled'>> & { kind?: CodeHostKind }) => api<Webhook>('PUT', path(host), change);
/** Generates (first time: with the kind) or rotates the secret: the only answer that carries it. */
export const newSecret = (host: string, kind?: CodeHostKind) => api<Webhook & { webhookUrl: string; secret: string }>('POST', `${path(host)}/secret`, kind ? { kind } : {});
export const listDeliveries = (host: string) => api<{ deliveries: Delivery[] }>('GET', `${path(host)}/deliveries?limit=50`);
export const testDelivery = (host: string) => api<{ outcome: string; deliveryId: string }>('POST', `${path(host)}/test`);

/** A delivery's outcome in a few words: `refused · unmapped`, `queued`, `test`. */
export const outcomeText = (d: Pick<Delivery, 'outcome' | 'reason'>) => (d.reason ? `${d.outcome} · ${d.reason}` : d.outcome);

/** What the host's webhook page asks for, named as that host names it. */
export const HOST_SETUP: Record<CodeHostKind, { name: string; secretField: string; events: string; contentType: string }> = {
  github: { name: 'GitHub', secretField: 'Secret', events: 'Issue comments, Issues, Pull request review comments', contentType: 'Content type application/json. ' },
  gitlab: { name: 'GitLab', secretField: 'Secret token', events: 'Comments, Issues events, Merge request events', contentType: '' },
  gitea: { name: 'Gitea or Forgejo', secretField: 'Secret', events: 'Issue Comment, Issues, Pull Request', contentType: 'Content type application/json. ' },
};
