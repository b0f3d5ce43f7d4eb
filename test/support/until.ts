// Waiting in tests for something that happens in the background: poll until it holds, and fail
// naming what was awaited (and, if given, what was seen) once the time is up.

export interface UntilOptions {
  /** Between two checks. Default 10 ms. */
  everyMs?: number;
  /** What to add to the failure: the state seen at the end. */
  detail?: () => string;
}

export async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 5_000, o: UntilOptions = {}): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${o.detail ? `\n${o.detail()}` : ''}`);
    await new Promise((r) => setTimeout(r, o.everyMs ?? 10));
  }
}
