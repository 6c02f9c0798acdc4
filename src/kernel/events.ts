/**
 * What publishing inside a transaction needs of it (the database's Tx has this shape): delivery after it
 * commits, or a NOTIFY in it. Declared here so the kernel needs nothing of the database room.
 */
interface EventTx {
  afterCommit(fn: () => void): void;
  query(text: string, values?: unknown[]): Promise<unknown>;
}

/**
 * Publish/subscribe between the parts of the appliance, possibly in different processes. Implementations:
 * in-process (embedded mode: one process) and PostgreSQL LISTEN/NOTIFY (several serve/worker processes).
 * Payloads are JSON. Keep them small where you can (send ids, let subscribers load rows): on PostgreSQL one
 * over NOTIFY's 8000 bytes travels in pieces (see event-bus.ts), which every listening process reassembles.
 * Every subscriber of a channel, in every process, gets its events in one and the same order.
 */
export type EventHandler = (payload: unknown) => void;

export interface EventBus {
  /**
   * Whether other processes may hear what this one publishes (PostgreSQL); false when this process is
   * the whole appliance (embedded mode), so what it alone produces need not travel.
   */
  readonly shared: boolean;
  /** With a transaction, the event is delivered only if and when it commits. */
  publish(channel: string, payload: unknown, tx?: EventTx): Promise<void>;
  /** Resolves once the subscription is active; returns the function that ends it. */
  subscribe(channel: string, handler: EventHandler): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

/** Channel names are shared with LISTEN, so keep them to a safe identifier alphabet. */
export function assertChannel(channel: string): void {
  if (!/^[a-z][a-z0-9_.:-]{0,62}$/.test(channel)) throw new Error(`invalid event channel name: ${channel}`);
}
