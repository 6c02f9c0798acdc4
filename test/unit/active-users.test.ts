import { describe, expect, it } from 'vitest';
import { createInProcessBus } from '../../src/db/event-bus.js';
import { AUTH_REVOKED } from '../../src/core/auth/authentication.js';
import { ACTIVE_TTL_MS, createActiveUsers, INACTIVE_TTL_MS } from '../../src/core/auth/active-users.js';
import { silentLogger } from '../../src/kernel/logger.js';

const T = 't1';
const U = 'u1';

/** Active users over a table of states the test changes, counting the loads (the database queries). */
async function setup() {
  const state = new Map<string, boolean>([[U, true]]);
  let loads = 0;
  let gate: Promise<void> | null = null;
  let nowMs = 1_000_000;
  const bus = createInProcessBus();
  const active = createActiveUsers({
    load: async (_t, userId) => {
      loads++;
      const answer = state.get(userId) ?? false;
      if (gate) await gate;
      return answer;
    },
    bus,
    clock: { now: () => new Date(nowMs) },
    log: silentLogger,
  });
  await active.ensureHearing();
  return {
    active,
    state,
    bus,
    loads: () => loads,
    advance: (ms: number) => void (nowMs += ms),
    hold: () => {
      let release!: () => void;
      gate = new Promise((r) => (release = r));
      return () => {
        gate = null;
        release();
      };
    },
  };
}

describe('whether a runtime owner is still active', () => {
  it('asks the database once, then answers without a promise until the answer ages', async () => {
    const s = await setup();
    const first = s.active.check(T, U);
    expect(first).toBeInstanceOf(Promise);
    expect(await first).toBe(true);
    expect(s.active.check(T, U)).toBe(true);
    expect(s.active.check(T, U)).toBe(true);
    expect(s.loads()).toBe(1);
    s.advance(ACTIVE_TTL_MS);
    expect(await s.active.check(T, U)).toBe(true);
    expect(s.loads()).toBe(2);
  });

  it('hears a deactivation at once, even within the reuse time', async () => {
    const s = await setup();
    expect(await s.active.isActive(T, U)).toBe(true);
    s.state.set(U, false);
    await s.bus.publish(AUTH_REVOKED, { userId: U });
    expect(await s.active.check(T, U)).toBe(false);
    // A sign-out (no user named) changes nothing.
    await s.bus.publish(AUTH_REVOKED, { signInId: 's1' });
    expect(s.active.check(T, U)).toBe(false);
  });

  it('remembers "inactive" only briefly, so a reactivation lets the person through within a second', async () => {
    const s = await setup();
    s.state.set(U, false);
    expect(await s.active.isActive(T, U)).toBe(false);
    expect(s.active.check(T, U)).toBe(false);
    s.state.set(U, true);
    s.advance(INACTIVE_TTL_MS);
    expect(await s.active.check(T, U)).toBe(true);
  });

  it('shares one query between concurrent askers, and does not remember an answer a deactivation overtook', async () => {
    const s = await setup();
    const release = s.hold();
    const a = s.active.check(T, U);
    const b = s.active.check(T, U);
    expect(s.loads()).toBe(1);
    // The person is deactivated while the query that read them active is under way.
    s.state.set(U, false);
    await s.bus.publish(AUTH_REVOKED, { userId: U });
    release();
    expect(await a).toBe(true);
    expect(await b).toBe(true);
    expect(await s.active.check(T, U)).toBe(false);
    expect(s.loads()).toBe(2);
  });

  it('does not take an answer for one tenant as another\'s, nor an unknown person as active', async () => {
    const s = await setup();
    expect(await s.active.isActive(T, U)).toBe(true);
    expect(s.active.check('t2', U)).toBeInstanceOf(Promise);
    expect(await s.active.isActive(T, 'nobody')).toBe(false);
  });
});
