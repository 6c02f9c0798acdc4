// The dashboard's calls for choosing models: the models a person may choose, a session's model, and branching a
// session at a message. Kept apart from api.ts, which stays the one transport.

import { api } from './api';
import type { Branch, ModelCatalog, ModelChoice, SessionModel } from './wire.js';

export type { Branch, ModelCatalog, ModelChoice, SessionModel };

/** `all` (whoever manages roles): every model served, each with whether the caller may choose it. */
export const listModels = (all = false) => api<ModelCatalog>('GET', `/models${all ? '?all=true' : ''}`);
export const sessionModel = (sessionId: string) => api<SessionModel>('GET', `/sessions/${sessionId}/model`);
export const setSessionModel = (sessionId: string, model: string | null) => api<SessionModel>('PUT', `/sessions/${sessionId}/model`, { model });
export const branchSession = (sessionId: string, messageId: string) => api<Branch>('POST', `/sessions/${sessionId}/fork`, { messageId });

/**
 * The model an answer ran on, as the tenant names it: the transcript gives "<provider>/<model id>"; an
 * answer still streaming has only the runtime's model id.
 */
export function answerModel(info: { model?: unknown; modelID?: unknown }): string | null {
  if (typeof info.model === 'string') return info.model;
  return typeof info.modelID === 'string' ? info.modelID : null;
}

/** A model's short label: its display name, with its provider when two providers offer models. */
export function modelLabel(m: Pick<ModelChoice, 'name' | 'provider'>, several: boolean): string {
  return several ? `${m.name} (${m.provider})` : m.name;
}
