// Partition takeover with real executor processes: three `baton executor`s split the partitions;
// one is SIGKILLed (no release, no goodbye) and the survivors take over all of its partitions.
// They run on the same host as it, so they see its process is gone and take over on their next
// beat, before its heartbeat is older than the staleness limit (BATON_HEARTBEAT_INTERVAL × 3: the
// path for an executor on another host, covered by test/unit/partition-leases.test.ts); then work
// submitted to the installation still completes.
import { describe, expect, inject, it } from 'vitest';
import { foldPartitionLeases, partitionsOf } from '../../actors/partition-lease.machine.ts';
import { PARTITION_LEASES_STREAM, PartitionEvent } from '../../schemas/partition-events.ts';
import { batonProcesses, type BatonProcess } from '../support/baton-processes.ts';
import { useTestStore } from '../support/test-store.ts';

const INTERVAL_MS = 400;
const STALE_AFTER_MS = INTERVAL_MS * 3;

describe('partition takeover after an executor SIGKILL', () => {
  const natsUrl = inject('natsUrl');
  const transport = natsUrl ? 'nats' : 'postgres';
  const t = useTestStore({ beforeClose: () => killAll() });
  const { start, diagnostics, killAll } = batonProcesses(() => ({
    BATON_DATABASE_URL: t.db.url,
    BATON_LOG_LEVEL: 'info',
    BATON_HEARTBEAT_INTERVAL: `${INTERVAL_MS}ms`,
    ...(natsUrl ? { BATON_NATS_URL: natsUrl } : {}),
  }));

  const leases = async () => {
    const events = await t.store.readStream(PARTITION_LEASES_STREAM);
    return { events, snapshot: foldPartitionLeases(events.map((e) => PartitionEvent.parse({ type: e.type, data: e.data, metadata: e.metadata }))) };
  };
  /** The executor id a process logged with its first lease change. */
  const idOf = (p: BatonProcess) => p.waitFor(/"executorId":"([^"]+)"[^\n]*partition leases: /, 30_000).then((m) => m[1]!);
  async function until<T>(what: string, ms: number, probe: () => Promise<T | undefined>): Promise<T> {
    const deadline = Date.now() + ms;
    for (;;) {
      const v = await probe();
      if (v !== undefined) return v;
      if (Date.now() > deadline) throw new Error(`${what} not within ${ms} ms\n${diagnostics()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  it(`takes over a killed executor's partitions at once when its process is gone from this host (${transport})`, async () => {
    const executors = ['executor-1', 'executor-2', 'executor-3'].map((name) => start(name, ['executor', '--transport', transport, '--metrics-port', '0']));
    const ids = await Promise.all(executors.map(idOf));
    await until('the three to split the 16 partitions', 30_000, async () => {
      const { snapshot } = await leases();
      return ids.every((id) => partitionsOf(snapshot, id).length >= 4) ? true : undefined;
    });
    const victim = 1;
    const theirs = partitionsOf((await leases()).snapshot, ids[victim]!);
    executors[victim]!.proc.kill('SIGKILL');
    const killedAt = Date.now();
    await executors[victim]!.exited;
    const takenAt = await until('its partitions to be taken over', 10_000, async () => {
      const { snapshot } = await leases();
      return partitionsOf(snapshot, ids[victim]!).length === 0 ? Date.now() : undefined;
    });
    const { events, snapshot } = await leases();
    const takeovers = events.filter((e) => e.type === 'PartitionsTakenOver');
    const taken = takeovers.flatMap((e) => (e.data as { partitions: number[] }).partitions).sort((a, b) => a - b);
    console.info(`killed an executor holding ${theirs.length} partitions; all taken over ${takenAt - killedAt} ms later (staleness limit ${STALE_AFTER_MS} ms, beat every ${INTERVAL_MS} ms) by ${takeovers.length} takeover(s)`);
    expect(takeovers.every((e) => (e.data as { from: string }).from === ids[victim]), diagnostics()).toBe(true);
    expect(taken).toEqual(theirs);
    // Its process is gone on this host: taken over on a survivor's next beat, within the limit.
    expect(takenAt - killedAt).toBeLessThanOrEqual(STALE_AFTER_MS + 1_000);
    // Every partition is held by a survivor, fairly: 8 + 8.
    const survivors = ids.filter((_, i) => i !== victim);
    expect(survivors.map((id) => partitionsOf(snapshot, id).length).sort()).toEqual([8, 8]);
  }, 90_000);
});
