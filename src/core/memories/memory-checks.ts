import { isCleanString } from '../../lib/clean-string.js';
import { hasPermission, type PermissionName } from '../../kernel/authz.js';
import type { UserActor } from '../../kernel/context.js';
import { ForbiddenError, UnprocessableError, ValidationError } from '../../kernel/errors.js';
import type { RbacPermissions } from '../../kernel/permissions.js';
import type { MemoryRow, Viewer } from './memories.repo.js';
import {
  isMemoryKind,
  isMemoryVisibility,
  MEMORY_CONTENT_MAX,
  MEMORY_KINDS,
  MEMORY_LIMIT_DEFAULT,
  MEMORY_LIMIT_MAX,
  MEMORY_VISIBILITIES,
  normaliseMemoryText,
  screenMemoryText,
  type MemoryKind,
  type MemoryVisibility,
} from './memory-fns.js';

/** SPEC.md's Memory ({id, kind, content, visibility, createdAt}) with what a client needs besides. */
export function publicMemory(m: MemoryRow) {
  return {
    id: m.id,
    kind: m.kind,
    content: m.content,
    visibility: m.visibility,
    status: m.status,
    source: m.source,
    author: { id: m.userId, handle: m.authorHandle },
    signals: m.signals ?? [],
    embedded: m.embedded,
    ...(m.source === 'agent' ? { sessionId: m.sessionId, messageId: m.messageId } : {}),
    createdAt: m.createdAt,
    updatedAt: m.updatedAt,
  };
}
export type PublicMemory = ReturnType<typeof publicMemory>;

/** Who reads: the person, or their agent, with the read permissions that decide what they see (memories.repo.ts `visibleTo`). */
export const viewerOf = (actor: { tenantId: string; userId: string; permissions: RbacPermissions }): Viewer => ({
  tenantId: actor.tenantId,
  userId: actor.userId,
  readOwn: actor.permissions.memory.read_own,
  readTeam: actor.permissions.memory.read_team,
  readOrg: actor.permissions.memory.read_org,
});

export function need(actor: UserActor, permission: PermissionName, what?: string): void {
  if (!hasPermission(actor.permissions, permission)) throw new ForbiddenError(what ?? `missing permission ${permission}`, { details: { permission } });
}

export const checkKind = (kind: unknown): MemoryKind => {
  if (!isMemoryKind(kind)) throw new ValidationError(`kind must be one of ${MEMORY_KINDS.join(', ')}`, { details: { field: 'kind' } });
  return kind;
};
export const checkVisibility = (visibility: unknown): MemoryVisibility => {
  if (!isMemoryVisibility(visibility)) throw new ValidationError(`visibility must be one of ${MEMORY_VISIBILITIES.join(', ')}`, { details: { field: 'visibility' } });
  return visibility;
};
/** The text as it is stored, screened and injected: normalised (memory-fns.ts normaliseMemoryText). */
export const checkContent = (content: unknown): string => {
  if (typeof content !== 'string' || !content.trim()) throw new ValidationError('content must not be empty', { details: { field: 'content' } });
  if (content.length > MEMORY_CONTENT_MAX) throw new ValidationError(`content must be at most ${MEMORY_CONTENT_MAX} characters`, { details: { field: 'content' } });
  if (!isCleanString(content)) throw new ValidationError('content must be valid Unicode without NUL characters', { details: { field: 'content' } });
  const text = normaliseMemoryText(content);
  if (!text) throw new ValidationError('content must not be empty: nothing visible is left once invisible and control characters are removed', { details: { field: 'content' } });
  // NFKC expands some characters (U+FDFA is 18 letters): the limit holds for what is stored.
  if (text.length > MEMORY_CONTENT_MAX) throw new ValidationError(`content must be at most ${MEMORY_CONTENT_MAX} characters once normalised (NFKC)`, { details: { field: 'content' } });
  return text;
};

/**
 * Team and org memories reach other people's agents: one that reads like instructions to a model is
 * refused (422 memory_flagged, naming the signals), when written and when widened. Kept private, it is
 * its author's own and allowed (their own words to their own agent).
 */
export const checkShareable = (content: string, visibility: MemoryVisibility): string[] => {
  const signals = screenMemoryText(content);
  if (visibility !== 'private' && signals.length) {
    throw new UnprocessableError(`a ${visibility} memory reaches other people's agents, and this one reads like instructions to a model (${signals.join(', ')})`, {
      code: 'memory_flagged',
      details: { field: 'content', visibility, signals },
      hint: 'Rephrase it as a plain fact or preference (no orders to the assistant, links to fetch or commands to run), or keep it private.',
    });
  }
  return signals;
};

export const checkLimit = (limit: unknown, max = MEMORY_LIMIT_MAX): number => {
  const n = limit ?? MEMORY_LIMIT_DEFAULT;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > max) throw new ValidationError(`limit must be a whole number from 1 to ${max}`, { details: { field: 'limit' } });
  return n;
};
