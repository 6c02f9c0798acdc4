import type { Http2ServerResponse } from 'node:http2';
import type { RunnerNotice } from '../core/runtime/host/runner-links.js';
import type { createRuntimeHost, PoolStatus } from '../core/runtime/host/runtime-host.js';
import type { RuntimeHandle } from '../core/runtime/host/runtime-transport.js';

/**
 * How long a runner keeps its runtimes without hearing from the control plane (it syncs every 5 s):
 * under the control plane's heartbeat timeout (30 s), so they are stopped here before anyone else
 * can be given their users. A control plane with another timeout (AGENTWS_RUNNER_HEARTBEAT_TIMEOUT_MS)
 * tells its lease with each sync.
 */
const LEASE_MS = 20_000;
/** A lease asked for this recently may have a runtime starting on it: its user's files are not dropped meanwhile. */
export const LEASE_IN_USE_MS = 60_000;

/** The runtimes a runner hosts (the same runtime host as serve's). */
export type RunnerRuntimes = ReturnType<typeof createRuntimeHost>;

/** The lease the control plane gave this runner for a user: requests for the user carry its fence. */
interface Lease {
  tenantId: string;
  fence: number;
  /** When a start last asked for it (a lease outlives its runtime: one stopped idle keeps it here). */
  at: number;
}

/** What a runner knows of its users and of the control plane, shared by its channel, its orders and its self-fence. */
export interface RunnerState {
  leases: Map<string, Lease>;
  /** Each user's workspace quota as the control plane last sent it (with a start: their tenant's setting). */
  quotas: Map<string, number | null>;
  /** Runtimes being configured by the control plane (through this channel) before the host hands them out. */
  configuring: Map<string, RuntimeHandle>;
  /** The control plane's watches of runtimes starting and stopping here (GET /watch). */
  watchers: Set<Http2ServerResponse>;
  lastStatus: PoolStatus | null;
  /** When the control plane last confirmed this runner's leases (see the self-fence in start). */
  lastSync: number;
  /** LEASE_MS, or what the control plane said with its last sync (two thirds of its heartbeat timeout). */
  leaseMs: number;
}

export function createRunnerState(): RunnerState {
  return { leases: new Map(), quotas: new Map(), configuring: new Map(), watchers: new Set(), lastStatus: null, lastSync: Date.now(), leaseMs: LEASE_MS };
}

/** The fence this runner holds the user's lease under (0: none; the control plane then ignores the notice). */
export const fenceOf = (state: RunnerState, userId: string) => state.leases.get(userId)?.fence ?? 0;

/** Tells every watch of the control plane (a runtime ready or stopped). */
export function notify(state: RunnerState, notice: RunnerNotice): void {
  const line = `${JSON.stringify(notice)}\n`;
  for (const w of state.watchers) w.write(line);
}
