// Retrying a dead letter (`baton dlq retry`, GraphQL retryDeadLetter): its message is published
// again only while its execution can still take it. Once the executor has ended the execution
// (it abandons one whose message became a dead letter), the worker would drop the message as not
// its own any more: the retry ran nothing yet consumed the dead letter and reported success.
import { isFinal, statusOf } from '../../actors/execution.machine.ts';
import { BatonError, NotFoundError } from '../errors.ts';
import type { DeadLetter, WorkTransport } from '../transport/work-transport.ts';
import type { ExecutionRuntime } from './execution-runtime.ts';
import { loadIfStored } from './dead-letter-standing.ts';

/** The dead letter's execution is final, or gone: publishing its message again would run nothing. */
export class DeadLetterNotRetriableError extends BatonError {
  constructor(readonly messageId: string, readonly executionId: string, why: string) {
    super(`dead letter ${messageId} is not published again: its execution ${executionId} ${why}, so no worker would run it; the dead letter is kept (delete it when done), and submitting the work again runs it anew`);
  }
}

export async function retryDeadLetter(transport: WorkTransport, runtime: Pick<ExecutionRuntime, 'load'>, messageId: string): Promise<DeadLetter> {
  const dead = await transport.getDeadLetter(messageId);
  if (!dead) throw new NotFoundError('dead letter', messageId);
  const executionId = dead.message.executionId;
  const loaded = await loadIfStored(runtime, executionId);
  if (!loaded) throw new DeadLetterNotRetriableError(messageId, executionId, 'is not in the event store (archived or never stored)');
  if (isFinal(loaded.snapshot)) throw new DeadLetterNotRetriableError(messageId, executionId, `has ended (${statusOf(loaded.snapshot)})`);
  return transport.retryDeadLetter(messageId);
}
