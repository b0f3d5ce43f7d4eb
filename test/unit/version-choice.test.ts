// Which version an execution runs on (src/executor/version-choice.ts), alone and through
// placement: two fleets of one action, v1 and v2, side by side during a deploy.
import { describe, expect, it } from 'vitest';
import { slotBucket } from '../../src/executor/concurrency-slots.ts';
import { plan, type PlacementWorker } from '../../src/executor/placement.ts';
import { handoffVersion, versionChooser } from '../../src/executor/version-choice.ts';
import { WaitingQueue } from '../../src/executor/waiting-queue.ts';
import { offeredNames } from '../../src/input/action-versions.ts';

const ACTION = 'demo.echo';
const worker = (workerId: string, version: number | undefined, capacity = 10): PlacementWorker => ({ workerId, actions: offeredNames(ACTION, version), capacity });

let seq = 0;
function waiting(queue: WaitingQueue, version?: number): string {
  const executionId = `e${++seq}`;
  queue.add({ executionId, action: ACTION, priority: 0, seq, notBefore: 0, since: 0, avoid: [], bucket: slotBucket(ACTION, null), ...(version !== undefined && { version }) });
  return executionId;
}

function place(queue: WaitingQueue, workers: PlacementWorker[], load: Record<string, number> = {}) {
  return Object.fromEntries(plan({ now: 0, queue, workers, loadOf: (id) => load[id] ?? 0, freeSlots: () => Infinity }).map((p) => [p.execution.executionId, `${p.workerId}@${p.actionVersion}`]));
}

describe('versionChooser', () => {
  const fleets = [worker('old-1', undefined), worker('old-2', 1), worker('new-1', 2)];
  const choose = versionChooser(() => fleets);

  it('takes the pin, and only workers offering it', () => {
    expect(choose(ACTION, 1)).toEqual({ version: 1, workers: [fleets[0], fleets[1]] });
    expect(choose(ACTION, 2)).toEqual({ version: 2, workers: [fleets[2]] });
    expect(choose(ACTION, 3)).toBeUndefined();
  });

  it('takes the newest offered when unpinned; undefined when nobody offers the action', () => {
    expect(choose(ACTION, undefined)).toEqual({ version: 2, workers: [fleets[2]] });
    expect(versionChooser(() => [])(ACTION, undefined)).toBeUndefined();
  });

  it('records the version in the handoff when pinned or not 1, so unversioned histories stay as they were', () => {
    expect(handoffVersion(undefined, 1)).toEqual({});
    expect(handoffVersion(1, 1)).toEqual({ actionVersion: 1 });
    expect(handoffVersion(undefined, 2)).toEqual({ actionVersion: 2 });
  });
});

describe('placement with two fleets side by side', () => {
  it('sends pinned executions to their fleet and unpinned ones to the newest', () => {
    const q = new WaitingQueue();
    const v1 = waiting(q, 1);
    const v2 = waiting(q, 2);
    const newest = waiting(q);
    expect(place(q, [worker('old', undefined), worker('new', 2)])).toEqual({ [v1]: 'old@1', [v2]: 'new@2', [newest]: 'new@2' });
  });

  it('keeps an unpinned execution waiting for the newest version rather than sending it to an older fleet with room', () => {
    const q = new WaitingQueue();
    const newest = waiting(q);
    const pinned = waiting(q, 1);
    expect(place(q, [worker('old', 1), worker('new', 2, 1)], { new: 1 })).toEqual({ [pinned]: 'old@1' });
    expect(newest).toBeDefined();
  });

  it('leaves a pin no fit worker offers waiting, and places the executions behind it', () => {
    const q = new WaitingQueue();
    const missing = waiting(q, 3);
    const behind = waiting(q, 2);
    const placed = place(q, [worker('old', 1), worker('new', 2)]);
    expect(placed).toEqual({ [behind]: 'new@2' });
    expect(placed[missing]).toBeUndefined();
  });

  it('never visits executions pinned to a version nobody offers: 20,000 of them cost nothing', () => {
    const q = new WaitingQueue();
    for (let i = 0; i < 20_000; i++) waiting(q, 3);
    const mine = [waiting(q, 2), waiting(q)];
    let taken = 0;
    const take = q.take.bind(q);
    q.take = (key) => (taken++, take(key));
    expect(Object.keys(place(q, [worker('new', 2)]))).toEqual(mine);
    expect(taken).toBeLessThanOrEqual(5);
  });

  it('shares a concurrency bucket\'s free slots between its pinned and unpinned executions', () => {
    const q = new WaitingQueue();
    const first = waiting(q, 1);
    waiting(q);
    waiting(q, 2);
    const placed = plan({ now: 0, queue: q, workers: [worker('old', 1), worker('new', 2)], loadOf: () => 0, freeSlots: () => 1 });
    expect(placed.map((p) => p.execution.executionId)).toEqual([first]);
  });

  it('without versions anywhere, places exactly as before: version 1 on every worker', () => {
    const q = new WaitingQueue();
    const a = waiting(q);
    const b = waiting(q);
    expect(place(q, [worker('w1', undefined, 1), worker('w2', undefined, 1)])).toEqual({ [a]: 'w1@1', [b]: 'w2@1' });
  });
});
