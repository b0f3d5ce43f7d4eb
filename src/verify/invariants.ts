// The invariant checker behind `baton verify` and the fault-injection suite: read every
// execution stream in an EventStore and check DESIGN.md's invariants against it.
//
//   1. every submitted execution exists (else "lost") and reaches exactly one terminal event
//      (else "stuck": with requireTerminal every non-final one, otherwise only those past a dwell
//      limit, or waiting on a decision the executor makes at once, by more than stuckAfterMs);
//   2. at most one terminal event; each attempt's ExecutionStarted at most once ("duplicated runs");
//   3. revisions contiguous from 0, ExecutionRequested first, every event in the catalog;
//   4. the history folds through the machine, which is where "only the owner appends" lives;
//   5. the read model equals a rebuild (verifyReadModel), when a pool is given;
//   6. no two executions share an idempotency key.
//
// Streams are found with readAll (paged from START, execution streams only), then each is read
// whole with readStream, a few at a time: a stream is checked as it is now, not as the events
// readAll happened to deliver so far.
import type pg from 'pg';
import { EXECUTION_STREAM_PREFIX, executionStreamId } from '../../schemas/events.ts';
import type { ExecutionStatus } from '../../actors/execution.machine.ts';
import { START, type EventStore } from '../eventstore/event-store.ts';
import { describeBehind, repairCommands, verifyReadModel, type VerifyReport } from '../readmodel/verify.ts';
import { checkExecution, type InvariantViolation } from './execution-check.ts';
import { DEFAULT_STUCK_AFTER_MS } from './defaults.ts';

export { checkExecution, type ExecutionVerdict, type InvariantNumber, type InvariantViolation } from './execution-check.ts';

export interface CheckInvariantsOptions {
  /** The ids the caller submitted: any without a stream is reported as lost. */
  expectedExecutionIds?: Iterable<string>;
  /** Every execution must be final: each non-final one is stuck. Default false (a live system). */
  requireTerminal?: boolean;
  /** Without requireTerminal: how far past its deadline a non-final execution may be. Default 60 s. */
  stuckAfterMs?: number;
  /** Compare the read model with a rebuild (invariant 5) on this database. */
  pool?: pg.Pool;
  /**
   * Stream ids retention archived, for a store whose deleted streams stay in readAll (EventStoreDB
   * until a scavenge): an empty stream of one of them is archived, not lost.
   */
  archivedStreams?: ReadonlySet<string>;
  /** readAll page size. Default 5,000. */
  pageSize?: number;
  /** Streams read at once. Default 8. */
  concurrency?: number;
  /** Reported at most once per page and once per 500 streams. */
  onProgress?(progress: CheckProgress): void;
  now?: () => Date;
}

export interface CheckProgress {
  /** scan: events of the log read; streams: executions checked; read-model: events rebuilt. */
  phase: 'scan' | 'streams' | 'read-model';
  done: number;
  total?: number;
  /** streams: events read so far (a progress bar's unit, with the scan's count as total). */
  events?: number;
}

export interface InvariantReport {
  /** No violation, nothing lost, nothing stuck, and the read model (when checked) equals a rebuild. */
  ok: boolean;
  /** Execution streams checked. */
  executions: number;
  /** Executions in a final state. */
  terminal: number;
  /** Executions not final and not (yet) stuck: still legitimately in flight. */
  inFlight: number;
  stuck: string[];
  lost: string[];
  /** Attempts whose ExecutionStarted appears more than once, across all executions. */
  duplicatedRuns: number;
  violations: InvariantViolation[];
  /** Executions by the state they fold to ("unreadable" when not even event 0 folds). */
  statuses: Record<string, number>;
  readModel?: VerifyReport;
}

export { DEFAULT_STUCK_AFTER_MS };

export async function checkInvariants(store: EventStore, options: CheckInvariantsOptions = {}): Promise<InvariantReport> {
  const pageSize = options.pageSize ?? 5_000;
  const concurrency = options.concurrency ?? 8;
  const requireTerminal = options.requireTerminal ?? false;
  const stuckAfterMs = options.stuckAfterMs ?? DEFAULT_STUCK_AFTER_MS;
  const progress = options.onProgress ?? (() => {});

  // 1. Which executions exist: one pass over the log, keeping only stream ids.
  const ids: string[] = [];
  const seen = new Set<string>();
  let after = START;
  let scanned = 0;
  await store.settled?.(); // an unrelated open transaction must not end the pass early
  for (;;) {
    const page = await store.readAll({ after, limit: pageSize, streamPrefixes: [EXECUTION_STREAM_PREFIX] });
    if (page.length === 0) break;
    for (const e of page) {
      if (!e.streamId.startsWith(EXECUTION_STREAM_PREFIX)) continue;
      const id = e.streamId.slice(EXECUTION_STREAM_PREFIX.length);
      if (!seen.has(id)) {
        seen.add(id);
        ids.push(id);
      }
    }
    scanned += page.length;
    after = page[page.length - 1]!.globalPosition;
    progress({ phase: 'scan', done: scanned });
  }
  // An expected id readAll has not delivered may still exist (its transaction commits late):
  // it is looked up directly, and lost only when its stream is empty.
  const expected = [...new Set(options.expectedExecutionIds ?? [])];
  for (const id of expected) {
    if (!seen.has(id)) {
      seen.add(id);
      ids.push(id);
    }
  }

  // 2. Each stream, whole.
  const now = (options.now ?? (() => new Date()))();
  const report: InvariantReport = { ok: false, executions: 0, terminal: 0, inFlight: 0, stuck: [], lost: [], duplicatedRuns: 0, violations: [], statuses: {} };
  const byKey = new Map<string, string[]>();
  let next = 0;
  let done = 0;
  let eventsRead = 0;
  await Promise.all(
    Array.from({ length: Math.max(1, Math.min(concurrency, ids.length)) }, async () => {
      while (next < ids.length) {
        const id = ids[next++]!;
        const events = await store.readStream(executionStreamId(id));
        eventsRead += events.length;
        if (++done % 500 === 0 || done === ids.length) progress({ phase: 'streams', done, total: ids.length, events: eventsRead });
        if (events.length === 0) {
          if (!options.archivedStreams?.has(executionStreamId(id))) report.lost.push(id);
          continue;
        }
        const v = checkExecution(id, events, { now, stuckAfterMs });
        report.executions++;
        const status: ExecutionStatus | 'unreadable' = v.status ?? 'unreadable';
        report.statuses[status] = (report.statuses[status] ?? 0) + 1;
        report.duplicatedRuns += v.duplicatedRuns;
        report.violations.push(...v.violations);
        if (v.final) report.terminal++;
        else if (requireTerminal || v.overdue || v.status === null) report.stuck.push(id);
        else report.inFlight++;
        if (v.idempotencyKey !== undefined) byKey.set(v.idempotencyKey, [...(byKey.get(v.idempotencyKey) ?? []), id]);
      }
    }),
  );

  // Invariant 6: one execution per idempotency key.
  for (const [key, owners] of byKey) {
    if (owners.length < 2) continue;
    for (const id of owners.slice(1)) {
      report.violations.push({ invariant: 6, executionId: id, message: `idempotency key ${JSON.stringify(key)} is also used by execution ${owners[0]} (${owners.length} executions share it)` });
    }
  }

  // Invariant 5.
  if (options.pool) {
    progress({ phase: 'read-model', done: 0 });
    report.readModel = await verifyReadModel({
      pool: options.pool,
      store,
      onProgress: (p) => progress({ phase: 'read-model', done: p.events }),
    });
    if (!report.readModel.ok) {
      const problems = [
        ...report.readModel.projections.filter((p) => p.problem).map((p) => `${p.projection}: ${p.problem}`),
        ...report.readModel.differences.map((d) => {
          const first = (keys: string[]) => keys.slice(0, 3).map((k) => (d.columns[k] ? `${k} (${d.columns[k]!.join(', ')})` : k)).join(', ') + (keys.length > 3 ? ', …' : '');
          const part = (n: number, what: string, keys: string[]) => `${n} ${what}${keys.length > 0 ? `: ${first(keys)}` : ''}`;
          return `${d.projection}.${d.table}: ${part(d.differing.length, 'differing', d.differing)}; ${part(d.missing.length, 'missing', d.missing)}; ${part(d.extra.length, 'extra', d.extra)}`;
        }),
      ];
      const repair = repairCommands(report.readModel);
      const what = report.readModel.differences.length > 0 ? 'the read model differs from a rebuild from the events' : 'the read model is not verified, or not current';
      report.violations.push({ invariant: 5, executionId: null, message: `${what}: ${problems.join('; ')}${repair.length > 0 ? `; repair: ${repair.join(' && ')}` : ''}` });
    }
  }

  // Deterministic output whatever order the streams were read in.
  report.stuck.sort();
  report.lost.sort();
  report.violations.sort((a, b) => a.invariant - b.invariant || (a.executionId ?? '').localeCompare(b.executionId ?? ''));
  report.ok = report.violations.length === 0 && report.lost.length === 0 && report.stuck.length === 0 && (report.readModel?.ok ?? true);
  return report;
}

/** The report in a few lines for a terminal or a test failure message. */
export function describeReport(r: InvariantReport, o: { maxItems?: number } = {}): string {
  const max = o.maxItems ?? 20;
  const list = (xs: string[]) => `${xs.slice(0, max).join(', ')}${xs.length > max ? ` … (+${xs.length - max})` : ''}`;
  const lines = [
    `${r.executions.toLocaleString('en')} executions: ${r.terminal.toLocaleString('en')} terminal, ${r.inFlight.toLocaleString('en')} in flight, ${r.stuck.length} stuck, ${r.lost.length} lost, ${r.duplicatedRuns} duplicated run(s)`,
    `states: ${Object.entries(r.statuses).sort(([a], [b]) => a.localeCompare(b)).map(([s, n]) => `${s} ${n}`).join(', ') || '(none)'}`,
  ];
  if (r.readModel) {
    const behind = r.readModel.projections.filter((p) => p.behind).map((p) => `${p.projection} ${describeBehind(p.behind!)}`);
    const unverified = r.readModel.projections.some((p) => p.problem && !p.behind);
    // Equal up to its checkpoint: a read model behind is not wrong, but not current either.
    const state = r.readModel.differences.length > 0 ? 'DIFFERS from a rebuild' : unverified ? 'NOT VERIFIED' : behind.length > 0 ? `equals a rebuild from the events up to its checkpoint, but is BEHIND the store: ${behind.join('; ')}` : 'equals a rebuild from the events';
    lines.push(`read model: ${state}`);
  }
  if (r.lost.length > 0) lines.push(`lost (submitted, no stream): ${list(r.lost)}`);
  if (r.stuck.length > 0) lines.push(`stuck (not terminal): ${list(r.stuck)}`);
  for (const v of r.violations.slice(0, max)) lines.push(`invariant ${v.invariant}${v.executionId ? ` ${v.executionId}` : ''}: ${v.message}`);
  if (r.violations.length > max) lines.push(`… and ${r.violations.length - max} more violation(s)`);
  const behind = r.ok ? r.readModel?.projections.filter((p) => p.behind).map((p) => p.behind!.seconds) : [];
  // A projector keeps up within a second or two under load: only a longer lag suggests none is running.
  const lagging = behind !== undefined && behind.length > 0 && Math.max(...behind) >= 10;
  lines.push(r.ok ? `OK: every invariant holds${behind?.length ? ` (the read model is behind the store, not wrong${lagging ? ': is `baton projector` running?' : ': writes are still coming in'})` : ''}` : 'FAILED');
  return lines.join('\n');
}
