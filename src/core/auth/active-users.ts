import type { Clock } from '../../lib/clock.js';
import type { EventBus } from '../../kernel/events.js';
import type { Logger } from '../../kernel/logger.js';
import { AUTH_REVOKED } from './authentication.js';

/**
 * How long an answer "this person is active" is reused per process. A deactivation or removal is heard at
 * once (AUTH_REVOKED, published in its transaction) and drops it, so this bounds only a missed
 * notification. The gateways ask on every model call, memory tool call, git and MCP request: without the
 * reuse each would cost a query.
 */
export const ACTIVE_TTL_MS = 5000;
/**
 * How long "inactive" is reused: short, so a person reactivated by their identity provider (nothing is
 * published then) is let through again within a second, while a deactivated person's agent calling in a
 * loop costs at most a query a second per process.
 */
export const INACTIVE_TTL_MS = 1000;
const MAX_ENTRIES = 50_000;

/**
 * Whether the owner of a runtime is still an active person of their tenant: not deactivated (SCIM
 * `active: false`), not removed. Asked where a runtime's credential is turned into its owner (the gateway
 * host: model calls, the memory tools, the git and MCP gateways; the local egress proxy) and before a
 * queued turn or a plan is started for them, so an agent that outlived its person's deactivation, or a
 * turn queued before it, gets nothing done in their name.
 *
 * `check` answers synchronously when it can (the hot path pays a map lookup, not a promise) and with a
 * promise when it must ask the database; concurrent askers share one query.
 */
export function createActiveUsers(deps: {
  /** True when the user exists in the tenant and is not deactivated. */
  load: (tenantId: string, userId: string) => Promise<boolean>;
  bus: EventBus;
  clock: Clock;
  log: Logger;
}) {
  const known = new Map<string, { tenantId: string; at: number; active: boolean }>();
  const loading = new Map<string, Promise<boolean>>();
  // Bumped by every forget: a load that began before one is not remembered (it may predate the change).
  let generation = 0;
  // Until this process hears revocations nothing is remembered: a deactivation published before the
  // subscription was in place would be missed, and the entry would outlive it (as authentication does).
  let hearing = false;
  let subscribing: Promise<unknown> | null = null;
  const ensureHearing = () =>
    (subscribing ??= deps.bus
      .subscribe(AUTH_REVOKED, (p) => {
        const userId = (p as { userId?: unknown } | null)?.userId;
        if (typeof userId === 'string') forget(userId);
      })
      .then(
        () => {
          hearing = true;
        },
        (err) => {
          deps.log.warn({ err: (err as Error).message }, 'cannot hear deactivations: every gateway call asks the database');
          subscribing = null;
        },
      ));

  /** Drops what this process remembers of a person (deactivated, removed, or reactivated here). */
  function forget(userId: string): void {
    generation++;
    known.delete(userId);
  }

  function check(tenantId: string, userId: string): boolean | Promise<boolean> {
    if (!hearing) void ensureHearing();
    const hit = known.get(userId);
    if (hit && hit.tenantId === tenantId && deps.clock.now().getTime() - hit.at < (hit.active ? ACTIVE_TTL_MS : INACTIVE_TTL_MS)) return hit.active;
    const key = `${tenantId}:${userId}`;
    let pending = loading.get(key);
    if (!pending) {
      const started = generation;
      pending = deps.load(tenantId, userId).then(
        (active) => {
          loading.delete(key);
          if (hearing && started === generation) {
            if (known.size >= MAX_ENTRIES) known.clear();
            known.set(userId, { tenantId, at: deps.clock.now().getTime(), active });
          }
          return active;
        },
        (err: unknown) => {
          loading.delete(key);
          throw err;
        },
      );
      loading.set(key, pending);
    }
    return pending;
  }

  return {
    /** Whether the person is active: a boolean when this process knows, else a promise of one. */
    check,
    /** The same, always as a promise. */
    isActive: (tenantId: string, userId: string): Promise<boolean> => Promise.resolve(check(tenantId, userId)),
    forget,
    /** Starts hearing deactivations (before anything is remembered); `check` starts it too. */
    ensureHearing,
  };
}
