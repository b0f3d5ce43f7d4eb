// Where a host's follower starts (issue 18 item 1): not at position 0, which replays every event
// ever stored before the first handoff, but at a checkpoint P plus the actors still live at P.
//
// The rule. P is the `executions` projection's checkpoint: the projector reads in commit order
// (transaction id, position) below the snapshot horizon and moves the checkpoint with the rows
// in one transaction, so every event at or before P (in that order) has committed and the read
// model holds exactly those. P is therefore a gapless resume point: readAll(after: P) delivers
// every event after it, and a `stream`-order subscription started from P has nothing pending
// behind it (pg-follow.ts). An actor needs loading at start only when it is live at P and has
// no event after P (one with a later event is loaded by the runtime's observe when that event
// comes: actor-runtime.ts reads a stream it does not hold). So the live ids must come from a
// state that includes everything up to P: the executions table at P (read in the same
// transaction as P), and for the few other streams (workers, workflows, schedules, which have
// no read-model status of their own) the store itself, read after P committed, which includes
// everything up to P and perhaps more (an actor that ended since is loaded and dropped: harmless).
// A lagging projector only moves P back (more to follow, nothing skipped); a projector that
// never ran (P = 0) or a store without these tables (EventStoreDB) means following from 0.
import type pg from 'pg';
import type { AnyStateMachine } from 'xstate';
import { executionMachine } from '../../actors/execution.machine.ts';
import { scheduleMachine } from '../../actors/schedule.machine.ts';
import { workflowMachine } from '../../actors/workflow.machine.ts';
import { READ_MODEL_SCHEMA } from '../../projections/index.ts';
import { EXECUTION_STREAM_PREFIX } from '../../schemas/events.ts';
import { SCHEDULE_STREAM_PREFIX } from '../../schemas/schedule-events.ts';
import { WORKFLOW_STREAM_PREFIX } from '../../schemas/workflow-events.ts';
import { WORKER_STREAM_PREFIX } from '../../schemas/worker-events.ts';
import { prefixPatterns } from '../eventstore/pg-follow.ts';

export interface StartPoint {
  /** Follow the store after this global position (gapless: see the header). */
  after: bigint;
  /** Stream ids of the actors live at `after` (or later), to load before following. */
  live: string[];
}

/** The machine's top-level states, split by whether they are final: what "live" means is the machine's. */
function statesOf(machine: AnyStateMachine): { final: string[]; live: string[] } {
  const states = Object.entries(machine.config.states ?? {}) as [string, { type?: string }][];
  return { final: states.filter(([, s]) => s.type === 'final').map(([n]) => n), live: states.filter(([, s]) => s.type !== 'final').map(([n]) => n) };
}

/** Streams read from the store at start, and which of their last states end them (workers never end). */
const STORE_READ: Record<string, string[]> = {
  [WORKER_STREAM_PREFIX]: [],
  [WORKFLOW_STREAM_PREFIX]: statesOf(workflowMachine).final,
  [SCHEDULE_STREAM_PREFIX]: statesOf(scheduleMachine).final,
};

/**
 * The start point for a follower of `prefixes`, or undefined to follow from 0 (the projector has
 * not projected anything yet). Throws when the tables are not there; the caller falls back to 0.
 */
export async function readStartPoint(pool: pg.Pool, prefixes: readonly string[]): Promise<StartPoint | undefined> {
  const unknown = prefixes.filter((p) => p !== EXECUTION_STREAM_PREFIX && !(p in STORE_READ));
  if (unknown.length > 0) return undefined; // nothing says which of those are live: follow from 0
  const client = await pool.connect();
  try {
    // One snapshot for P and the rows read at P.
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const checkpoint = await client.query<{ position: string }>(`SELECT position FROM baton_projection_checkpoints WHERE projection = 'executions'`);
    const after = BigInt(checkpoint.rows[0]?.position ?? '0');
    if (after === 0n) return undefined;
    const live: string[] = [];
    // Store-read kinds first: a workflow loaded before its steps tracks them as they load.
    const fromStore = prefixes.filter((p) => p in STORE_READ);
    if (fromStore.length > 0) {
      const streams = await client.query<{ stream_id: string; state: string | null }>(
        `SELECT s.stream_id, e.metadata->>'stateAfter' AS state
           FROM baton_streams s JOIN baton_events e ON e.stream_id = s.stream_id AND e.revision = s.revision
          WHERE s.stream_id LIKE ANY($1::text[])`,
        [prefixPatterns(fromStore)],
      );
      for (const { stream_id, state } of streams.rows) {
        const prefix = fromStore.find((p) => stream_id.startsWith(p))!;
        // An event without stateAfter (written before it was recorded) may be live: load it.
        if (state === null || !STORE_READ[prefix]!.includes(state)) live.push(stream_id);
      }
    }
    if (prefixes.includes(EXECUTION_STREAM_PREFIX)) {
      // In the order their requests were committed, as a follower hears them: the executor serves
      // equal priorities first come, first served, after a restart too.
      const executions = await client.query<{ execution_id: string }>(
        `SELECT x.execution_id FROM ${READ_MODEL_SCHEMA}.executions x
           LEFT JOIN baton_events e ON e.stream_id = '${EXECUTION_STREAM_PREFIX}' || x.execution_id AND e.revision = 0
          WHERE x.status = ANY($1::text[])
          ORDER BY e.transaction_id, e.global_position`,
        [statesOf(executionMachine).live],
      );
      for (const r of executions.rows) live.push(`${EXECUTION_STREAM_PREFIX}${r.execution_id}`);
    }
    return { after, live };
  } finally {
    await client.query('ROLLBACK').catch(() => undefined);
    client.release();
  }
}
