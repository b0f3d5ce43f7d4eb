// What every duty of the executor's monitor shares: the view it reads, the runtime it appends
// through, and `enforce`, the one way it appends (a refusal means the state moved on: the
// deadline was met, or another executor acted first).
import type { Logger } from 'pino';
import { RejectedCommandError } from '../../errors.ts';
import type { ExecutionRuntime } from '../../runtime/execution-runtime.ts';
import type { WorkerRuntime } from '../../runtime/worker-kind.ts';
import type { WorkTransport } from '../../transport/work-transport.ts';
import type { ExecutorMetrics } from '../executor-metrics.ts';
import type { SchedulingView } from '../scheduling-view.ts';
import type { WorkerDirectory } from '../worker-directory.ts';

export interface MonitorOptions {
  view: SchedulingView;
  /** Worker streams, for WorkerLost. */
  workerStreams: WorkerRuntime;
  runtime: ExecutionRuntime;
  transport: WorkTransport;
  workers: WorkerDirectory;
  log: Logger;
  metrics: ExecutorMetrics | undefined;
  now: () => number;
  parallelism: number;
  staleAfterMs: number;
  republishAfterMs: number;
  timeoutGraceMs: number;
  noWorkerTimeoutMs: number;
  /** The runtime tag an action's work messages carry. */
  runtimeOf(action: string): string;
}

export interface MonitorContext extends MonitorOptions {
  /** Append for the monitor, counted and logged as `kind`; a refusal is logged at debug and is no error. */
  enforce(kind: string, executionId: string, command: Parameters<ExecutionRuntime['dispatch']>[1]): Promise<void>;
}

export function monitorContext(o: MonitorOptions): MonitorContext {
  return {
    ...o,
    async enforce(kind, executionId, command) {
      try {
        const r = await o.runtime.dispatch(executionId, command);
        if (r.appended) {
          o.metrics?.enforced.inc({ kind });
          o.log.warn({ executionId, kind }, `monitor: ${kind}`);
        }
      } catch (err) {
        if (err instanceof RejectedCommandError) o.log.debug({ executionId, kind, reason: err.message }, 'monitor: nothing to enforce any more');
        else o.log.error({ executionId, kind, err }, 'monitor: append failed; will try again');
      }
    },
  };
}
