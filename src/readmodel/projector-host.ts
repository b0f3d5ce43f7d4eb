// The long-running projector (`baton projector`, and inside `baton dev`): one follower for all
// projections whose checkpoints stand at one position (group-follow.ts), one for each other,
// and those apart brought level with the group when that is exact (group-join.ts); a
// projection whose version changed is rebuilt aside meanwhile, then follows; every minute a
// sample of executions is re-folded to catch drift. Errors (the database going away) are
// logged and retried with backoff; nothing is skipped meanwhile, because the checkpoint only
// moves with the rows.
import pg from 'pg';
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import { projections as allProjections, type Projection } from '../../projections/index.ts';
import { readModelSchemaOf } from '../db/db-schema.ts';
import { STALLED_SQL } from '../../projections/executions.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import { oldestUnapplied } from './lag.ts';
import type { BatchResult } from '../../projections/projection.ts';
import { NewerVersionError, newerVersionMessage, readCheckpoint } from './checkpoints.ts';
import { ProjectionApplyError, followGroup, groupByPosition } from './group-follow.ts';
import { joinGroupAt } from './group-join.ts';
import { RecentlyChanged, sampleExecutionDrift } from './drift.ts';
import { rebuildProjection } from './rebuild.ts';
import { eventSourceOf } from './event-source.ts';
import { alignStoreViews } from './store-views.ts';
import { Backoff } from '../async/backoff.ts';

export interface ProjectorOptions {
  pool: pg.Pool;
  store: EventStore;
  log: Logger;
  registry?: Registry;
  projections?: readonly Projection[];
  batchSize?: number;
  /** How often to re-fold a sample of executions (ms); 0 turns it off. Default 60 s. */
  driftIntervalMs?: number;
  driftSampleSize?: number;
  /** While projections follow apart, how often to try joining them to the main group (ms). Default 60 s. */
  regroupIntervalMs?: number;
  /** While a projection stands by (built by a newer Baton), how often to look at its version again (ms). Default 60 s. */
  standByRecheckMs?: number;
}

export interface Projector {
  stop(): Promise<void>;
  /** Problems for /healthz: projections whose follower is failing right now, or left alone because a newer Baton built them. */
  problems(): string[];
  /** Run a drift check now (also what the timer runs). */
  checkDrift(): Promise<void>;
}

function projectorMetrics(o: ProjectorOptions, list: readonly Projection[]) {
  const registers = o.registry ? [o.registry] : [];
  return {
    events: new Counter({ name: 'baton_projection_events_total', help: 'Events applied to the read model', labelNames: ['projection'], registers }),
    batches: new Counter({ name: 'baton_projection_batches_total', help: 'Batches committed with their checkpoint', labelNames: ['projection'], registers }),
    refused: new Counter({ name: 'baton_projection_refused_events_total', help: 'Stored events the machine refused while projecting', labelNames: ['projection'], registers }),
    driftChecks: new Counter({ name: 'baton_projection_drift_checks_total', help: 'Executions re-folded from their events to check their row', registers }),
    drift: new Counter({ name: 'baton_projection_drift_total', help: 'Re-folded executions whose row differed from their events', registers }),
    stalled: new Gauge({
      name: 'baton_executions_stalled',
      help: 'Running executions with no progress for longer than their stall limit (heartbeats are not progress)',
      registers,
      // The database away fails the scrape (503, src/observability/http.ts), as the executor's does:
      // a last value kept, or no series at all, read as a healthy projector to dashboards and alerts.
      async collect() {
        const r = await o.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${pg.escapeIdentifier(readModelSchemaOf(o.pool))}.executions WHERE ${STALLED_SQL}`);
        this.set(Number(r.rows[0]!.n));
      },
    }),
    lag: new Gauge({
      name: 'baton_projection_lag_seconds',
      help: 'Age of the oldest event a projection has not applied yet (0 when caught up)',
      labelNames: ['projection'],
      registers,
      async collect() {
        const now = Date.now();
        await Promise.all(
          list.map(async (p) => {
            const { position } = await readCheckpoint(o.pool, p.name);
            const next = await oldestUnapplied(o.store, position, p.streamPrefixes);
            this.set({ projection: p.name }, next ? Math.max(0, (now - next.getTime()) / 1000) : 0);
          }),
        );
      },
    }),
  };
}

/** A follower's failure for problems() (which names the projection): a member's apply error without its own "projection x:" prefix. */
function failureMessage(err: unknown): string {
  const cause = err instanceof ProjectionApplyError ? err.cause : err;
  return (cause as Error)?.message ?? String(cause);
}

/**
 * The database went away (Postgres connection and resource errors, a socket error): every member
 * would fail alike, so a group stays together and retries, rather than splitting.
 */
function connectionLost(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  // Also a server that refuses us for now: a database not accepting connections (55000, as ALTER
  // DATABASE … ALLOW_CONNECTIONS false answers), gone (3D000), or credentials rotated (28xxx).
  // Counted as a projection's own failure, /healthz stayed 503 after the database came back.
  if (typeof code === 'string' && (/^(08|28|53|57|3D)/.test(code) || /^E[A-Z]+$/.test(code))) return true;
  if (code === '55000' && /not currently accepting connections/.test((err as Error)?.message ?? '')) return true;
  return /Connection terminated|connection timeout/i.test((err as Error)?.message ?? '');
}

export function startProjector(o: ProjectorOptions): Projector {
  const list = o.projections ?? allProjections;
  const source = eventSourceOf(o.store, o.pool);
  const log = o.log;
  const metrics = projectorMetrics(o, list);
  const stopping = new AbortController();
  /** Projections failing now, each with why and whether the database going away was the cause. */
  const failing = new Map<string, { message: string; connectionLost: boolean }>();
  const fail = (name: string, message: string, lost = false) => failing.set(name, { message, connectionLost: lost });
  /**
   * The database answered for these members: one that failed only because it was gone is no longer
   * failing. At a quiet time no batch comes to say so, and /healthz stayed 503 until one did.
   */
  const answered = (members: readonly Projection[]) => {
    for (const p of members) if (failing.get(p.name)?.connectionLost) failing.delete(p.name);
  };
  const backoffs = new Map(list.map((p) => [p.name, new Backoff()]));
  const driftSampleSize = o.driftSampleSize ?? 20;
  const recentlyChanged = new RecentlyChanged(driftSampleSize);
  const hooks = {
    onBatch(p: Projection, events: readonly unknown[], result: BatchResult) {
      failing.delete(p.name);
      backoffs.get(p.name)!.reset();
      // A group batch may hold none of this projection's events: its checkpoint moved, nothing applied.
      if (events.length === 0) return;
      metrics.events.inc({ projection: p.name }, events.length);
      metrics.batches.inc({ projection: p.name });
      if (result.refused.length > 0) metrics.refused.inc({ projection: p.name }, result.refused.length);
      recentlyChanged.add(result.changedExecutions);
    },
  };

  /**
   * Follow one unit (a group at one position, or a projection alone) until the round ends.
   * 'moved' from a follower, or checkpoints found apart after an error, end the round: the
   * caller re-reads every checkpoint and groups afresh.
   */
  async function runUnit(unit: Projection[], from: bigint | undefined, round: AbortController, apart: (p: Projection) => void): Promise<void> {
    let members = unit;
    let names = members.map((p) => p.name);
    let backoff = backoffs.get(names[0]!)!;
    let position = from;
    if (from !== undefined) answered(members); // the round just read their checkpoints
    for (let attempt = 0; !round.signal.aborted; attempt++) {
      try {
        if (attempt > 0 || position === undefined) {
          // After a failure (or split off a group): go on from where the checkpoints are, if they are still together.
          const now = await Promise.all(members.map((p) => readCheckpoint(o.pool, p.name)));
          answered(members);
          if (now.some((c, i) => c.position !== now[0]!.position || c.version !== members[i]!.version)) return round.abort();
          position = now[0]!.position;
        }
        const common = { pool: o.pool, store: o.store, from: position!, signal: round.signal, log, batchSize: o.batchSize, hooks };
        const outcome = await followGroup({ ...common, projections: members });
        if (outcome === 'moved') {
          log.info({ projections: names }, 'checkpoint moved by another writer; regrouping from the stored positions');
          return round.abort();
        }
      } catch (err) {
        if (round.signal.aborted) return;
        const failed = err instanceof ProjectionApplyError && !connectionLost(err.cause) ? members.find((p) => p.name === err.projection) : undefined;
        if (failed && members.length > 1) {
          // One member cannot apply this batch (a poison event, a bug): the others must not stop
          // with it. It follows apart from here and retries alone; it joins again once it gets past.
          fail(failed.name, failureMessage(err));
          members = members.filter((p) => p !== failed);
          names = members.map((p) => p.name);
          backoff = backoffs.get(names[0]!)!;
          log.error({ err, projection: failed.name, group: names }, 'a projection failed inside its group; it follows apart and retries alone');
          apart(failed);
          continue;
        }
        const lost = !failed && connectionLost(err instanceof ProjectionApplyError ? err.cause : err);
        for (const name of failed ? [failed.name] : names) fail(name, failureMessage(err), lost);
        log.error({ err, projections: names, retryInMs: backoff.nextMs }, 'projection follower failed; retrying');
        await backoff.wait(round.signal);
      }
    }
  }

  const readGroups = async (of: readonly Projection[]) => groupByPosition(of, await Promise.all(of.map((p) => readCheckpoint(o.pool, p.name))));

  /** Try to bring every unit apart level with the largest group (group-join.ts); the followers are paused. */
  async function joinApart(groups: { members: Projection[]; position: bigint }[]): Promise<void> {
    const main = groups.reduce((a, b) => (b.members.length > a.members.length ? b : a));
    for (const g of groups) {
      if (g === main || stopping.signal.aborted) continue;
      const projections = g.members.map((p) => p.name);
      try {
        const outcome = await joinGroupAt({ pool: o.pool, store: o.store, members: g.members, from: g.position, target: main.position, targetMembers: main.members, log, batchSize: o.batchSize, hooks });
        if (outcome === 'joined') log.info({ projections, group: main.members.map((p) => p.name) }, 'projections brought level with the group; following together');
      } catch (err) {
        log.warn({ err, projections }, 'could not bring projections level with the group; they follow apart for now');
      }
    }
  }

  let round: AbortController | undefined;
  let rebuilding: Promise<void> | undefined;

  /** Projections left alone because a newer Baton built them: the stored version each was last seen at. */
  const standingBy = new Map<string, { stored: number; message: string }>();
  /** Say so once per stored version (each round looks again), and once when it is ours to follow again. */
  function standBy(newer: readonly Projection[], stored: readonly { version: number }[]): void {
    for (const [name, { stored: was }] of standingBy) {
      if (newer.some((p) => p.name === name)) continue;
      standingBy.delete(name);
      log.info({ projection: name, was }, 'projection no longer at a newer version: this projector takes it up again');
    }
    newer.forEach((p, i) => {
      const version = stored[i]!.version;
      failing.delete(p.name); // not failing: not ours to apply
      if (standingBy.get(p.name)?.stored === version) return;
      const message = newerVersionMessage(p.name, version, p.version, 'this projector');
      standingBy.set(p.name, { stored: version, message });
      log.warn({ projection: p.name, storedVersion: version, codeVersion: p.version }, message);
    });
  }

  /** Rebuild aside, one after another, projections whose version (or form) changed; the others follow meanwhile. */
  async function rebuildChanged(changed: { projection: Projection; from: number; toTable: boolean }[]): Promise<void> {
    for (const { projection: p, from, toTable } of changed) {
      if (stopping.signal.aborted) return;
      try {
        if (toTable) log.info({ projection: p.name }, "projection's view of the events becomes a table (this event store is elsewhere): rebuilding aside");
        else log.info({ projection: p.name, from, to: p.version }, 'projection version changed: rebuilding aside');
        await rebuildProjection({ pool: o.pool, store: o.store, projection: p, log, batchSize: o.batchSize });
        failing.delete(p.name);
      } catch (err) {
        if (stopping.signal.aborted) return;
        // A newer projector swapped its version in meanwhile: the next round stands this one by.
        if (err instanceof NewerVersionError) return;
        fail(p.name, (err as Error).message);
        const backoff = backoffs.get(p.name)!;
        log.error({ err, projection: p.name, retryInMs: backoff.nextMs }, 'rebuilding a projection failed; retrying');
        await backoff.wait(stopping.signal);
        return; // the next round finds it still changed and starts again
      }
    }
  }

  /**
   * Each round: projections whose version changed are rebuilt aside in the background (the
   * round ends when that is done); the others follow, one group per position their checkpoints
   * stand at. On a fresh database all start at 0 and follow as one group for
   * good; a rebuilt projection (its checkpoint at its own last event) follows alone until it is
   * brought level with the largest group (joinApart, at each round's start). In a
   * 10,000-execution `baton bench` (NATS, 1 worker, 50 at once; run back to back on a shared,
   * noisy 2-core machine, five pairs) one group instead of four followers: 660–919 against
   * 592–865 executions/s, each pair's group run ahead by 3–12%; bench process CPU 10.6–12.0 s
   * against 11.9–12.5 s, Postgres backends 6.4–9.5 s against 6.6–7.4 s (noisy: shared server);
   * the executions lag p50 263–332 ms against 184–233 ms (the members' applies now run one
   * after another in one transaction), p99 1.5–2.2 s against 2.3–3.1 s.
   */
  async function run(): Promise<void> {
    const backoff = new Backoff();
    while (!stopping.signal.aborted) {
      try {
        // A view of the events whose events are elsewhere now is rebuilt as a table, like a
        // projection whose version changed (store-views.ts); a table becomes its view at once.
        const toTable = await alignStoreViews(o.pool, list, source, log);
        const checkpoints = await Promise.all(list.map((p) => readCheckpoint(o.pool, p.name)));
        // A version above ours was built by a newer Baton: never rebuilt down, nor followed.
        const newer = list.filter((p, i) => checkpoints[i]!.version > p.version);
        standBy(newer, checkpoints.filter((c, i) => c.version > list[i]!.version));
        const isCurrent = (p: Projection, i: number) => checkpoints[i]!.version === p.version && !toTable.has(p);
        const changed = list.flatMap((p, i) => (isCurrent(p, i) || newer.includes(p) ? [] : [{ projection: p, from: checkpoints[i]!.version, toTable: toTable.has(p) }]));
        const current = list.filter(isCurrent);
        let groups = groupByPosition(current, checkpoints.filter((_, i) => isCurrent(list[i]!, i)));
        if (groups.length > 1) {
          await joinApart(groups);
          groups = await readGroups(current);
        }
        backoff.reset();
        // stop() may have come while we read checkpoints or joined above: its abort event is gone,
        // so a round started now would never end (nor stop() return). Nothing awaits from here on
        // until the listener is added.
        if (stopping.signal.aborted) break;
        const thisRound = (round = new AbortController());
        const stop = () => thisRound.abort();
        stopping.signal.addEventListener('abort', stop, { once: true });
        // A finished rebuild ends the round, so that the rebuilt projection follows (and joins).
        rebuilding ??= changed.length > 0 ? rebuildChanged(changed).finally(() => ((rebuilding = undefined), round?.abort())) : undefined;
        // Projections still apart: end the round now and then to try joining them again; one
        // standing by for a newer version: to look again (it may have been rolled back).
        const regroup = groups.length > 1 ? setTimeout(stop, o.regroupIntervalMs ?? 60_000) : undefined;
        const recheck = newer.length > 0 ? setTimeout(stop, o.standByRecheckMs ?? 60_000) : undefined;
        let retry: NodeJS.Timeout | undefined;
        const units: Promise<void>[] = [];
        // A member split off its group (runUnit) follows alone from the group's position, and the
        // round ends now and then so that it may join again.
        const follow = (members: Projection[], position: bigint | undefined) =>
          units.push(
            runUnit(members, position, thisRound, (failed) => {
              follow([failed], undefined);
              retry ??= setTimeout(stop, o.regroupIntervalMs ?? 60_000);
            }),
          );
        try {
          const ended = new Promise<void>((resolve) => thisRound.signal.addEventListener('abort', () => resolve(), { once: true }));
          for (const g of groups) follow(g.members, g.position);
          await ended;
          // Units may have been added while the round ran: wait for every one.
          for (let i = 0; i < units.length; i++) await units[i];
        } finally {
          clearTimeout(retry);
          clearTimeout(regroup);
          clearTimeout(recheck);
          stopping.signal.removeEventListener('abort', stop);
        }
      } catch (err) {
        if (stopping.signal.aborted) break;
        for (const p of list) fail(p.name, (err as Error).message, connectionLost(err));
        log.error({ err, retryInMs: backoff.nextMs }, 'projector failed to start its followers; retrying');
        await backoff.wait(stopping.signal);
      }
    }
    await rebuilding;
  }

  async function checkDrift(): Promise<void> {
    if (!list.some((p) => p.name === 'executions')) return;
    const sample = await sampleExecutionDrift({ pool: o.pool, store: o.store, sampleSize: driftSampleSize, recent: recentlyChanged.newest(driftSampleSize) });
    metrics.driftChecks.inc(sample.checked);
    if (sample.drifted.length > 0) {
      metrics.drift.inc(sample.drifted.length);
      for (const d of sample.drifted) log.error({ executionId: d.executionId, fields: d.fields }, 'read model drift: row differs from its events');
    }
  }

  const running = run();
  const driftEvery = o.driftIntervalMs ?? 60_000;
  const driftTimer =
    driftEvery > 0
      ? setInterval(() => {
          checkDrift().catch((err: unknown) => log.warn({ err }, 'drift check failed'));
        }, driftEvery)
      : undefined;
  driftTimer?.unref();

  return {
    async stop() {
      stopping.abort();
      if (driftTimer) clearInterval(driftTimer);
      await running;
    },
    problems: () => [...[...failing].map(([name, { message }]) => `projection ${name}: ${message}`), ...[...standingBy.values()].map((s) => s.message)],
    checkDrift,
  };
}
