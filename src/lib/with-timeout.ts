/**
 * What `p` settles with, or what `onTimeout` returns (or throws) once `ms` have passed, whichever comes
 * first. The timer never outlives the race, so a finished call leaves nothing pending.
 */
export async function withTimeout<T, U>(p: Promise<T>, ms: number, onTimeout: () => U): Promise<T | U> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<U>((resolve, reject) => {
    timer = setTimeout(() => {
      try {
        resolve(onTimeout());
      } catch (err) {
        reject(err);
      }
    }, ms);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}
