// A stored snapshot (xstate's persisted form, through JSON, as baton_snapshots keeps it) must be
// indistinguishable from the fold it was taken from: on every generated path through the
// machine, cut anywhere, restoring there and folding the rest gives the whole fold's state, and
// the restored snapshot decides the next event exactly as the folded one does.
import { describe, expect, it } from 'vitest';
import { decideExecution, foldExecution, persistExecution, restoreExecution, type ExecutionSnapshot } from '../../actors/execution.machine.ts';
import { generateExecutionPaths, pathAlphabet } from '../support/execution-paths.ts';

const paths = generateExecutionPaths();
const plain = (s: ExecutionSnapshot) => JSON.parse(JSON.stringify({ value: s.value, status: s.status, context: s.context, output: s.output })) as unknown;
const throughJson = (s: ExecutionSnapshot) => restoreExecution(JSON.parse(JSON.stringify(persistExecution(s))));

describe('persisted execution snapshots', () => {
  it('restored at any cut of any path, then folded on, reach the whole fold', () => {
    let cuts = 0;
    for (const path of paths) {
      const whole = foldExecution(path.events);
      for (let cut = 1; cut <= path.events.length; cut++) {
        let s = throughJson(foldExecution(path.events.slice(0, cut)));
        for (const e of path.events.slice(cut)) {
          const d = decideExecution(s, e);
          if (!d.ok) throw new Error(`path cut at ${cut}: ${e.type} refused after restore: ${d.reason}`);
          s = d.snapshot;
        }
        expect(plain(s)).toEqual(plain(whole));
        cuts++;
      }
    }
    expect(cuts).toBeGreaterThan(1_000);
  });

  it('decides every event of the alphabet as the folded snapshot does', () => {
    const alphabet = pathAlphabet();
    for (const path of paths.filter((_, i) => i % 7 === 0)) {
      const folded = foldExecution(path.events);
      const restored = throughJson(folded);
      for (const e of alphabet) {
        const a = decideExecution(folded, e);
        const b = decideExecution(restored, e);
        expect(b.ok).toBe(a.ok);
        if (a.ok && b.ok) expect(plain(b.snapshot)).toEqual(plain(a.snapshot));
        if (!a.ok && !b.ok) expect(b.reason).toBe(a.reason);
      }
    }
  });
});
