// The executor's /metrics: counters it bumps, and gauges read from its scheduling view when
// scraped (labelled by action only: concurrency keys are unbounded).
import { Counter, Gauge, type Registry } from 'prom-client';
import type { WorkTransport } from '../transport/work-transport.ts';
import type { ActionGauges } from './scheduling-entries.ts';
import type { SchedulingView } from './scheduling-view.ts';

export type ExecutorMetrics = ReturnType<typeof createExecutorMetrics>;

/**
 * `unoffered` gives, per action no live worker offers now (as the monitor last saw), how many
 * executions wait for it.
 */
export function createExecutorMetrics(registry: Registry, view: SchedulingView, transport: WorkTransport, unoffered: () => ReadonlyMap<string, number>) {
  const perAction = (name: string, help: string, values: () => Iterable<[string, number | undefined]>) =>
    new Gauge({
      name,
      help,
      labelNames: ['action'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [action, v] of values()) if (v !== undefined) this.set({ action }, v);
      },
    });
  const fromView = (pick: (g: ActionGauges) => number | undefined) => () => [...view.actionGauges()].map(([action, g]) => [action, pick(g)] as [string, number | undefined]);
  return {
    scheduled: new Counter({ name: 'baton_executor_handoffs_total', help: 'Executions handed off to a worker', registers: [registry] }),
    terminal: new Counter({ name: 'baton_executions_terminal_total', help: 'Executions that reached a terminal state', labelNames: ['status'], registers: [registry] }),
    waiting: new Gauge({ name: 'baton_executor_waiting', help: 'Executions waiting for a worker', registers: [registry], collect() { this.set(view.waitingCount()); } }),
    handedOff: new Gauge({ name: 'baton_executor_handed_off', help: 'Executions handed off and not yet started', registers: [registry], collect() { this.set(view.handedOff().length); } }),
    enforced: new Counter({ name: 'baton_executor_deadlines_enforced_total', help: 'Reclaims, timeouts and lost workers the monitor recorded', labelNames: ['kind'], registers: [registry] }),
    actionQueued: perAction('baton_action_queued', 'Executions of the action waiting in Requested for a slot or a worker (retries waiting for their time included)', fromView((g) => g.waiting)),
    actionSlots: perAction('baton_action_slots_held', 'Concurrency slots the action holds: executions scheduled, handed off or running, not yet final or returned to the executor', fromView((g) => g.held)),
    actionLimit: perAction('baton_action_concurrency_limit', 'The concurrency limit the action\'s workers advertise (per key when it declares one); absent when it has none', fromView((g) => g.limit)),
    actionAtLimit: perAction('baton_action_queued_at_limit', 'Of the queued executions, those whose action (or key) is at its concurrency limit now', fromView((g) => g.atLimit)),
    actionUnoffered: perAction(
      'baton_executor_waiting_unoffered',
      'Executions waiting in Requested for an action no live worker offers now; past BATON_NO_WORKER_TIMEOUT of that they are abandoned',
      () => unoffered(),
    ),
    queueDepth: new Gauge({
      name: 'baton_work_queue_depth',
      help: 'Work messages published and not yet acknowledged',
      registers: [registry],
      async collect() {
        this.set(await transport.depth());
      },
    }),
  };
}
