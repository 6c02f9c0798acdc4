import { createHash, randomBytes } from 'node:crypto';

/**
 * The rules of runner hosts, pure: tokens, health, and where a user's runtime goes.
 */

/** A runner not heard from for this long is lost: its users are placed elsewhere. */
export const RUNNER_HEARTBEAT_TIMEOUT_MS = 30_000;

/**
 * How often the serve holding a runner's channel syncs with it (its heartbeat), and how long the runner
 * keeps its runtimes without a sync (its lease): a sixth and two thirds of the heartbeat timeout, the same
 * margins whatever the timeout (5 s and 20 s by default).
 */
export function runnerTimings(timeoutMs = RUNNER_HEARTBEAT_TIMEOUT_MS): { heartbeatMs: number; leaseMs: number } {
  return { heartbeatMs: Math.round(timeoutMs / 6), leaseMs: Math.round((timeoutMs * 2) / 3) };
}

const RUNNER_TOKEN_PREFIX = 'agwr_';
/** A runner token: the prefix (so a leaked one is recognisable) and 32 random bytes, base64url. */
export const newRunnerToken = (): string => `${RUNNER_TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
/** What is stored of a runner token: its sha256, hex. */
export const runnerTokenHash = (token: string): string => createHash('sha256').update(token).digest('hex');
/** Whether a string has a runner token's shape (checked before the database is asked). */
export const looksLikeRunnerToken = (s: string): boolean => /^agwr_[A-Za-z0-9_-]{43}$/.test(s);

/** Names of runners and runner tokens: what a host name or a systemd instance can be. */
export const RUNNER_NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;

export type RunnerState = 'active' | 'draining' | 'lost' | 'offline';

export interface RunnerLoad {
  id: string;
  name: string;
  state: RunnerState;
  capacity: number;
  resident: number;
  /** Runtimes with a turn running (the others are idle: the runner stops one to make room for another). */
  busy?: number;
  heartbeatAt: Date | null;
  /** Mounts the shared storage (any user's workspace is there). */
  sharedStorage?: boolean;
}

/** Whether the runner's last heartbeat is recent enough ('stale': it is lost, or about to be declared so). */
export function runnerHealth(r: Pick<RunnerLoad, 'heartbeatAt'>, now: Date, timeoutMs = RUNNER_HEARTBEAT_TIMEOUT_MS): 'healthy' | 'stale' {
  return r.heartbeatAt && now.getTime() - r.heartbeatAt.getTime() <= timeoutMs ? 'healthy' : 'stale';
}

/** Whether the runner may be given (or keep) users: active or draining, and heard from recently. */
export function runnerHealthy(r: Pick<RunnerLoad, 'state' | 'heartbeatAt'>, now: Date, timeoutMs = RUNNER_HEARTBEAT_TIMEOUT_MS): boolean {
  return (r.state === 'active' || r.state === 'draining') && runnerHealth(r, now, timeoutMs) === 'healthy';
}

/**
 * Where a new placement goes: among healthy active runners (with `needShared`, only those mounting the
 * shared storage), first those with room (resident below capacity, counting the placements made since
 * their last heartbeat in `placed`), the least loaded by share of capacity, ties to the one with fewer
 * runtimes, then by name. When every runner is full, one whose runtimes are not all busy: it stops its
 * least recently used idle runtime to make room, as one host does (a fleet full of idle runtimes must not
 * keep a new user waiting for hours of idle timeout); the fewest busy by share first. Null when every
 * runtime of every runner has a turn running.
 */
export function chooseRunner<R extends RunnerLoad>(runners: R[], now: Date, o: { exclude?: string[]; placed?: Map<string, number>; needShared?: boolean; timeoutMs?: number } = {}): R | null {
  const recent = (r: R) => o.placed?.get(r.id) ?? 0;
  const load = (r: R) => r.resident + recent(r);
  const busy = (r: R) => Math.min(r.resident, r.busy ?? r.resident) + recent(r);
  const usable = runners.filter((r) => r.state === 'active' && runnerHealthy(r, now, o.timeoutMs) && !o.exclude?.includes(r.id) && r.capacity > 0 && (!o.needShared || r.sharedStorage === true));
  const byName = (a: R, b: R) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  const roomy = usable.filter((r) => load(r) < r.capacity).sort((a, b) => load(a) / a.capacity - load(b) / b.capacity || load(a) - load(b) || byName(a, b));
  if (roomy.length) return roomy[0];
  const evictable = usable.filter((r) => busy(r) < r.capacity).sort((a, b) => busy(a) / a.capacity - busy(b) / b.capacity || busy(a) - busy(b) || byName(a, b));
  return evictable[0] ?? null;
}

/** A runner token's ceiling on each of its runners' capacity when `--max-capacity` is not given. */
export const DEFAULT_MAX_CAPACITY = 100;
/** A jump in a runner's reported capacity is logged and audited at most this often per runner. */
export const CAPACITY_NOTE_EVERY_MS = 60 * 60_000;

/**
 * A runner's capacity as placement counts it: what it reports (a whole number from 0), never more than
 * its token's ceiling. The runner's word alone would let a compromised one attract every placement.
 */
export function cappedCapacity(reported: number, ceiling: number | null): number {
  const r = Number.isFinite(reported) ? Math.max(0, Math.floor(reported)) : 0;
  return ceiling === null ? r : Math.min(r, Math.max(0, ceiling));
}

/**
 * Whether what a runner reports about its capacity is news for the operator: a report over its token's
 * ceiling, or a large change (by at least half of what it was, and by at least 8), when it differs from
 * what it reported before. Same figure again: not news (a heartbeat every 5 s must not repeat it). A first
 * report is news only over the ceiling. Null when not news, or when it was noted within the last
 * `CAPACITY_NOTE_EVERY_MS` (a runner flapping between figures is noted once an hour, not at each beat).
 */
export function capacityNews(o: { reported: number; previous: number | null; ceiling: number | null; notedAt: Date | null; now: Date }): 'over_ceiling' | 'large_change' | null {
  if (o.previous === o.reported) return null;
  if (o.notedAt && o.now.getTime() - o.notedAt.getTime() < CAPACITY_NOTE_EVERY_MS) return null;
  if (o.ceiling !== null && o.reported > o.ceiling) return 'over_ceiling';
  if (o.previous === null) return null;
  const change = Math.abs(o.reported - o.previous);
  return change >= 8 && change * 2 >= o.previous ? 'large_change' : null;
}

export type PlacementReason = 'new' | 'lost' | 'offline' | 'draining';

/**
 * Whether a user's placement stays where it is (sticky: their workspace is there) or why it must go:
 * 'new' (no placement, or one made in another tenant), 'lost' (the runner missed its heartbeats),
 * 'offline' (its token was revoked, or the serve it belongs to stopped). A draining runner keeps its
 * users until the drain moves them. A serve's local runner has no heartbeat of its own: its state says.
 */
export function placementVerdict(
  current: { tenantId: string } | null,
  held: (Pick<RunnerLoad, 'state' | 'heartbeatAt'> & { kind: 'local' | 'remote' }) | null,
  tenantId: string,
  now: Date,
  timeoutMs = RUNNER_HEARTBEAT_TIMEOUT_MS,
): { keep: true } | { keep: false; reason: Exclude<PlacementReason, 'draining'> } {
  if (!current || current.tenantId !== tenantId) return { keep: false, reason: 'new' };
  if (!held || held.state === 'offline') return { keep: false, reason: 'offline' };
  if (held.state === 'lost') return { keep: false, reason: 'lost' };
  if (held.kind === 'local') return { keep: true };
  return runnerHealth(held, now, timeoutMs) === 'healthy' ? { keep: true } : { keep: false, reason: 'lost' };
}

/** "3s ago", "4m ago": a heartbeat's age as `runner list` shows it. */
export function ageText(at: Date | null, now: Date): string {
  if (!at) return 'never';
  const s = Math.max(0, Math.round((now.getTime() - at.getTime()) / 1000));
  if (s < 120) return `${s}s ago`;
  if (s < 7200) return `${Math.round(s / 60)}m ago`;
  return `${Math.round(s / 3600)}h ago`;
}
