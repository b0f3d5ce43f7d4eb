// What a run records while its action runs: progress (ctx.heartbeat(details)) and tags
// (ctx.tag), appended in order, each at the revision the run knows, so a run that lost the
// execution is refused (fenced) rather than writing into someone else's attempt. And how a
// run's result and details become the JSON stored: checked and copied, never changed.
import type { Logger } from 'pino';
import type { ExecutionSnapshot } from '../../actors/execution.machine.ts';
import { ActionError } from '../actions/index.ts';
import { describeProblem, InvalidInputError, under } from '../input/errors.ts';
import { returnedJson, type Json } from '../input/rules.ts';
import { BatonError, RejectedCommandError } from '../errors.ts';
import type { ExecutionRuntime } from '../runtime/execution-runtime.ts';

type Known = { snapshot: ExecutionSnapshot; revision: bigint };

/**
 * An action's result as stored (undefined, an action that returns nothing, is null). Not JSON
 * (NaN, a Map, a cycle, a throwing getter; src/input/rules.ts returnedJson) fails the run for
 * good as UnstorableResult, naming the place: running it again would return the same. A value's
 * own toJSON is honoured (a Date is stored as its ISO text), as JSON.stringify does.
 */
export function storedResult(value: unknown): Json {
  const r = returnedJson(value === undefined ? null : value);
  if (r.problem) throw new ActionError(`the action's result cannot be stored: ${describeProblem(under('result', [r.problem])[0]!)}`, { type: 'UnstorableResult', retryable: false });
  return r.json;
}

/** Progress details as stored, copied now (a later change to the object is not what was reported); bad details throw InvalidInputError naming the field, as ctx.tag does. */
function storedDetails(details: unknown): Json {
  const r = returnedJson(details);
  if (r.problem) throw new InvalidInputError(under('details', [r.problem]));
  return r.json;
}

export interface RunHistoryDeps {
  runtime: ExecutionRuntime;
  executionId: string;
  me: `worker:${string}`;
  log: Logger;
  /** Append ExecutionProgressed at most this often (ms). */
  progressEveryMs: number;
  /** The run was fenced (an append refused: someone else owns the execution now). */
  onFenced(err: RejectedCommandError): void;
}

export class RunHistory {
  /** The execution as this run last appended it: what the next append (and the outcome) expects. */
  known: Known;
  #appending: Promise<unknown> = Promise.resolve();
  #lastProgressAt = -Infinity;
  /** Details reported inside the throttle window, recorded when it ends (the last report must not be lost). */
  #pending: Json | undefined;
  #trailing: NodeJS.Timeout | undefined;
  /** The outcome is being recorded: a late report (an action still running after its abort) is not history. */
  #closed = false;

  constructor(
    private readonly deps: RunHistoryDeps,
    started: Known,
  ) {
    this.known = started;
  }

  /** ctx.heartbeat's details: checked and copied at once, recorded at most once per progressEveryMs, the latest at the window's end. */
  progress(details: unknown): void {
    const json = storedDetails(details);
    if (this.#closed) return;
    const wait = this.#lastProgressAt + this.deps.progressEveryMs - performance.now();
    if (wait <= 0 && this.#trailing === undefined) {
      this.#record(json);
      return;
    }
    this.#pending = json;
    if (this.#trailing === undefined) {
      this.#trailing = setTimeout(() => this.#recordPending(), Math.max(0, wait));
      this.#trailing.unref();
    }
  }

  /** ctx.tag: in order with progress; rejects when the tags were not recorded (fenced included: the run is being stopped anyway, but the tags are not history). */
  tag(added: Record<string, string>): Promise<void> {
    const recorded = this.#closed
      ? Promise.reject(new BatonError(`the run of execution ${this.deps.executionId} has ended: tags are no longer recorded`))
      : this.#append({ type: 'ExecutionTagged', data: { tags: { ...added } } }, 'could not record tags', true);
    // Not awaiting it is fine (README): a rejection nobody awaits must not become an unhandled one.
    recorded.catch(() => undefined);
    return recorded;
  }

  /**
   * The run's action ended: record the last reported progress now (unless the run lost the
   * store or the execution, where it would only be refused), then wait for every append.
   */
  async settle(recordPending: boolean): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#trailing);
    this.#trailing = undefined;
    if (recordPending && this.#pending !== undefined) this.#record(this.#pending);
    this.#pending = undefined;
    await this.#appending;
  }

  #recordPending(): void {
    this.#trailing = undefined;
    const pending = this.#pending;
    this.#pending = undefined;
    if (pending !== undefined) this.#record(pending);
  }

  #record(details: Json): void {
    this.#lastProgressAt = performance.now();
    void this.#append({ type: 'ExecutionProgressed', data: { details } }, 'could not record progress', false);
  }

  /** Appends after whatever is queued; `rejects`: the caller hears of a failure (else it is logged only). */
  #append(event: { type: 'ExecutionProgressed'; data: { details: Json } } | { type: 'ExecutionTagged'; data: { tags: Record<string, string> } }, failed: string, rejects: boolean): Promise<void> {
    const { runtime, executionId, me, log } = this.deps;
    const appended = this.#appending.then(async () => {
      try {
        const r = await runtime.dispatch(executionId, { ...event, by: me }, { known: this.known });
        this.known = { snapshot: r.snapshot, revision: r.revision };
      } catch (err) {
        if (err instanceof RejectedCommandError) this.deps.onFenced(err);
        else log.warn({ err }, failed);
        if (rejects) throw err;
      }
    });
    // The queue goes on past a failure.
    this.#appending = appended.catch(() => undefined);
    return appended;
  }
}
