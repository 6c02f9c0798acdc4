import { describe, expect, it } from 'vitest';
import { createStartGate } from '../../src/core/runtime/host/start-gate.js';

const tick = () => new Promise((r) => setTimeout(r, 0));

describe('start gate: runtime starts a host runs at once', () => {
  it('lets `size` in at once; the others wait for a place, oldest first', async () => {
    const gate = createStartGate(2);
    const order: string[] = [];
    const releases: Record<string, () => void> = {};
    for (const name of ['a', 'b', 'c', 'd']) void gate.enter().then((r) => (order.push(name), (releases[name] = r)));
    await tick();
    expect(order).toEqual(['a', 'b']);
    expect(gate.stats).toEqual({ running: 2, waiting: 2 });
    releases.b();
    releases.b(); // giving a place back twice frees one place only
    await tick();
    expect(order).toEqual(['a', 'b', 'c']);
    expect(gate.stats).toEqual({ running: 2, waiting: 1 });
    releases.a();
    await tick();
    expect(order).toEqual(['a', 'b', 'c', 'd']);
  });

  it('puts a start a turn waits for before early starts, also one that became urgent while it waited', async () => {
    const gate = createStartGate(1);
    const order: string[] = [];
    const first = await gate.enter();
    let turnArrived = false;
    void gate.enter(() => false).then((r) => (order.push('early-1'), r()));
    void gate.enter(() => turnArrived).then((r) => (order.push('early-then-wanted'), r()));
    void gate.enter(() => true).then((r) => (order.push('turn'), r()));
    turnArrived = true;
    first();
    await tick();
    await tick();
    await tick();
    expect(order).toEqual(['early-then-wanted', 'turn', 'early-1']);
  });
});
