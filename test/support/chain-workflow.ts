// A workflow stream as the orchestrator starts one, written straight to the store: tests that
// need a workflow's history (retention, the replay commands) without running an orchestrator.
import { randomUUID } from 'node:crypto';
import { workflowStreamId } from '../../schemas/workflow-events.ts';
import type { EventStore } from '../../src/eventstore/event-store.ts';
import { workflowKind } from '../../src/runtime/workflow-kind.ts';

/** Start a fail-fast workflow whose `steps` (core.noop each) run one after another; its id. */
export async function startChainWorkflow(store: EventStore, steps: readonly string[]): Promise<string> {
  const id = randomUUID();
  const definition = { onFailure: 'fail-fast' as const, steps: steps.map((s, i) => ({ id: s, action: 'core.noop', dependsOn: i === 0 ? [] : [steps[i - 1]!] })) };
  const first = workflowKind.make({ type: 'WorkflowStarted', data: { definition } as never, by: 'executor' }, new Date().toISOString());
  await store.append(workflowStreamId(id), [{ eventId: randomUUID(), type: first.type, data: first.data, metadata: first.metadata }], { expectedRevision: 'no_stream' });
  return id;
}
