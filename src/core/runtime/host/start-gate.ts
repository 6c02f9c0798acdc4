/**
 * At most `size` runtime starts (and preparations) at once on a host. A start is seconds of CPU (opencode
 * loading itself, then building its tools): fifteen people arriving together once started fifteen at
 * once on two cores, none of which answered within its 30 s start timeout, and their turns failed.
 * Queued, each start takes its few seconds and the last person waits for the ones before.
 *
 * Waiters whose `urgent()` holds (a turn waits for that runtime) go before the others (early starts for
 * people who have not asked anything yet), oldest first within each kind; urgency is asked again at each
 * hand-over, so an early start a turn has since asked for moves up.
 */
export function createStartGate(size: number) {
  let running = 0;
  const waiting: Array<{ urgent: () => boolean; go: () => void }> = [];

  function next() {
    if (running >= size || !waiting.length) return;
    const i = waiting.findIndex((w) => w.urgent());
    const [w] = waiting.splice(Math.max(i, 0), 1);
    running++;
    w.go();
  }

  return {
    /** Resolves with the function that gives the place back, once one is free. */
    enter(urgent: () => boolean = () => true): Promise<() => void> {
      return new Promise((resolve) => {
        waiting.push({
          urgent,
          go: () => {
            let released = false;
            resolve(() => {
              if (released) return;
              released = true;
              running--;
              next();
            });
          },
        });
        next();
      });
    },
    /** How many start now, and how many wait for a place. */
    get stats() {
      return { running, waiting: waiting.length };
    },
  };
}
