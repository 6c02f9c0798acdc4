/**
 * Resolves on the first SIGTERM or SIGINT. A second signal, or a shutdown that outlives its deadline,
 * ends the process at once: an operator pressing Ctrl-C twice means it.
 */
export function untilSignal(onForce: () => void): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    let received = false;
    const handler = (signal: NodeJS.Signals) => {
      if (received) return onForce();
      received = true;
      resolve(signal);
    };
    process.on('SIGTERM', handler);
    process.on('SIGINT', handler);
  });
}
