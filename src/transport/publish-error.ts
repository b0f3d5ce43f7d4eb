// A work message a transport could not store. It names the execution and attempt the message
// carries, so whoever logs the failure says which execution waits for the monitor's re-publish
// (a message id alone is an event id nobody can look up from a log).
import { BatonError } from '../errors.ts';
import type { WorkMessage } from './work-transport.ts';

export class WorkPublishError extends BatonError {
  readonly messageId: string;
  readonly executionId: string;
  readonly attempt: number;
  readonly workerId: string;

  /** `where`: the subject or queue it was for, for people. */
  constructor(m: WorkMessage, where: string, cause: unknown) {
    const why = cause instanceof Error ? cause.message : String(cause);
    super(`publish of work message ${m.messageId} (execution ${m.executionId}, attempt ${m.attempt}, worker ${m.workerId}) to ${where} failed: ${why}`, { cause });
    this.messageId = m.messageId;
    this.executionId = m.executionId;
    this.attempt = m.attempt;
    this.workerId = m.workerId;
  }
}
