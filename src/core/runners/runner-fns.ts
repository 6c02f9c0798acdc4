import { createHash, randomBytes } from 'node:crypto';

/**
 * The rules of runner hosts, pure: tokens, health, and where a user's runtime goes.
 */

/** The serve holding a runner's channel checks on it this often (its heartbeat). */
export const RUNNER_HEARTBEAT_MS = 5000;
/** A runner not heard from for this long is lost: its users are placed elsewhere. */
export const RUNNER_HEARTBEAT_TIMEOUT_MS = 30_000;

export const newRunnerToken = (): string => `agwr_${randomBytes(32).toString('base64url')}`;
export const runnerTokenHash = (token: string): string => createHash('sha256').update(token).digest('hex');

export type RunnerState = 'active' | 'draining' | 'lost' | 'offline';

export interface RunnerLoad {
  id: string;
  name: string;
  state: RunnerState;
  capacity: number;
  resident: number;
  heartbeatAt: Date | null;
}

/** Whether the runner answered its heartbeat recently enough to be given (or keep) users. */
export function runnerHealthy(r: Pick<RunnerLoad, 'state' | 'heartbeatAt'>, now: Date, timeoutMs = RUNNER_HEARTBEAT_TIMEOUT_MS): boolean {
  return (r.state === 'active' || r.state === 'draining') && !!r.heartbeatAt && now.getTime() - r.heartbeatAt.getTime() <= timeoutMs;
}

/**
 * Where a new placement goes: among healthy active runners with room (resident below capacity, counting
 * the placements made since their last heartbeat in `placed`), the least loaded by share of capacity;
 * ties go to the one with fewer runtimes, then by name. Null when none has room.
 */
export function chooseRunner<R extends RunnerLoad>(runners: R[], now: Date, o: { exclude?: string[]; placed?: Map<string, number> } = {}): R | null {
  const load = (r: R) => r.resident + (o.placed?.get(r.id) ?? 0);
  const fit = runners.filter((r) => r.state === 'active' && runnerHealthy(r, now) && !o.exclude?.includes(r.id) && r.capacity > 0 && load(r) < r.capacity);
  fit.sort((a, b) => load(a) / a.capacity - load(b) / b.capacity || load(a) - load(b) || a.name.localeCompare(b.name));
  return fit[0] ?? null;
}

/** "3s ago", "4m ago": a heartbeat's age as `runner list` shows it. */
export function ageText(at: Date | null, now: Date): string {
  if (!at) return 'never';
  const s = Math.max(0, Math.round((now.getTime() - at.getTime()) / 1000));
  if (s < 120) return `${s}s ago`;
  if (s < 7200) return `${Math.round(s / 60)}m ago`;
  return `${Math.round(s / 3600)}h ago`;
}
