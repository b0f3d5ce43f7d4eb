// Bounded waiting for the fault scenarios: every wait names what it waits for and gives up.
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Poll `probe` until it is true; throws after `ms`, naming `what` (and `detail()` when given). */
export async function until(what: string, probe: () => Promise<boolean> | boolean, ms: number, detail?: () => string): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    if (await probe()) return;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}${detail ? `\n${detail()}` : ''}`);
    await sleep(100);
  }
}

