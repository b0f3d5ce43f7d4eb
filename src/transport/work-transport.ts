// The WorkTransport port: carries "run this execution" to the one worker that holds its baton.
// Adapters: NATS JetStream (production, ./nats/) and a Postgres queue (embedded, ./postgres/).
// Both pass test/contract/work-transport.contract.ts. NATS is a doorbell, not a record: the
// event store says who owns what; a lost message is re-published from the events.
//
// Beside the work, a signal channel from the executor to one worker (sendSignal / onSignal):
// for cancellation after handoff. The record is the ExecutionCancelRequested event; the signal
// only rings the worker that holds the execution so its running action's AbortSignal fires. It
// is not durable, and the executor rings again (about every second) until the execution has
// left that worker, so at-most-once delivery and duplicates are both fine.

/** One unit of work, addressed to one worker. */
export interface WorkMessage {
  /** Dedupe id: the eventId of the ExecutionHandedOff it announces. Publishing it twice delivers once. */
  messageId: string;
  executionId: string;
  workerId: string;
  /** The runtime tag of the action (subject `work.<runtime>.<workerId>` on NATS). */
  runtime: string;
  action: string;
  attempt: number;
  /** Stream revision of the handoff: the expected revision of the worker's ExecutionStarted. */
  handoffRevision: string;
  /** When the executor published it (ISO), for pickup latency. */
  publishedAt: string;
  /**
   * The execution's state at handoffRevision, as the executor decided on it (absent when too
   * large): a worker starts from it instead of reading the stream (src/runtime/carried-execution.ts).
   */
  execution?: { machineVersion: string; value: string; context: Record<string, unknown> };
  /** The handoff's trace context (W3C), when the executor traces: the worker's run continues it (src/observability/tracing.ts). */
  traceparent?: string;
  tracestate?: string;
}

export interface Delivery {
  message: WorkMessage;
  /** 1 on first delivery. */
  deliveryCount: number;
  /** Done: never deliver again. */
  ack(): Promise<void>;
  /** Not now: deliver again after `delayMs` (default: at once). */
  nak(delayMs?: number): Promise<void>;
  /** Never deliver again, not even on failure (poison message). */
  term(): Promise<void>;
  /** Still working: push the redelivery deadline (ack-wait / visibility timeout) out again. */
  working(): Promise<void>;
}

export interface ConsumeOptions {
  /** Most deliveries handled at once; the transport fetches no more than the free slots. */
  concurrency: number;
}

export interface Consumer {
  /** Stop fetching; resolves when every delivery already handed to the handler has finished. */
  stop(): Promise<void>;
}

/**
 * A message that was delivered maxDeliver times without an ack: taken out of the work queue and
 * kept until someone retries or deletes it (`baton dlq`, the GraphQL API). The transport also
 * hands each one to onDeadLetter subscribers, so the executor can fail the execution.
 */
export interface DeadLetter {
  messageId: string;
  /** The message as it was published; retryDeadLetter publishes it again unchanged. */
  message: WorkMessage;
  /** The worker it was addressed to (message.workerId). */
  workerId: string;
  /** Deliveries it got before it was given up on. */
  deliveries: number;
  /** When it became a dead letter (ISO). */
  deadLetteredAt: string;
  /** Why, for people: e.g. "not acknowledged after 5 deliveries". */
  reason: string;
  /** Opaque position in the dead-letter list; listDeadLetters({ after: cursor }) continues after it. */
  cursor: string;
}

export interface ListDeadLettersOptions {
  /** At most this many (1 to 1,000), oldest dead letter first. */
  limit: number;
  /** A `cursor` from an earlier page: list the dead letters after that one. */
  after?: string;
}

export interface DeadLetterSubscription {
  /** Stop receiving; resolves once the handler call in progress (if any) has finished. */
  stop(): Promise<void>;
}

/**
 * A doorbell for one worker: not durable; the sender repeats it until it no longer applies.
 * It may arrive more than once, or not at all; the worker acts on the event store, not on it.
 */
export interface WorkerSignal {
  /** Cancel the run of `executionId` (ExecutionCancelRequested was appended). */
  kind: 'cancel';
  executionId: string;
  /** The attempt the worker holds; a signal for another attempt is ignored by the worker. */
  attempt: number;
  /** Why, for the history (ExecutionCancelled.reason). 1..1000 chars. */
  reason: string;
}

export interface SignalSubscription {
  /** Stop receiving: the handler is not called again once this resolves. Idempotent. */
  stop(): Promise<void>;
}

export interface WorkTransportOptions {
  /** Redeliver a message not acked within this time (ms). Default 30,000. */
  ackWaitMs?: number;
  /** Deliver a message at most this many times. Default 5. */
  maxDeliver?: number;
}

export interface WorkTransport {
  /**
   * Which transport this is. A worker's heartbeat says it, and an executor places work only on
   * workers of its own kind: a worker pulling from the Postgres queue never sees what an executor
   * publishes to NATS, and each handoff to it was reclaimed at its schedule-to-start deadline.
   */
  readonly kind?: 'nats' | 'postgres';
  /** Publish; resolves once the transport has stored every message (durable). Idempotent per messageId. */
  publish(messages: WorkMessage[]): Promise<void>;
  /**
   * Deliver messages addressed to `workerId` to `handler`, at most `concurrency` at a time.
   * The handler settles each delivery (ack/nak/term); one that throws or returns without
   * settling is nak'ed. Each message goes to one consumer at a time.
   */
  consume(workerId: string, handler: (delivery: Delivery) => Promise<void>, options: ConsumeOptions): Promise<Consumer>;
  /** Messages waiting for a worker (not yet acked), for metrics. Dead letters are not counted. */
  depth(workerId?: string): Promise<number>;
  /**
   * Hand every dead letter to `handler`, at least once: it is handed over again (after a back-off)
   * until a call resolves, and may be handed over twice even then (a crash between the handler and
   * the bookkeeping, two subscribers racing), so the handler must be idempotent. Subscribers in
   * several processes share the dead letters: each goes to one of them at a time. Dead letters
   * from before the subscription are delivered too. A subscriber also makes this transport watch
   * for exhausted messages that no consumer moved yet (see the adapters).
   */
  onDeadLetter(handler: (deadLetter: DeadLetter) => Promise<void>): Promise<DeadLetterSubscription>;
  /** Dead letters in the order they died, oldest first, whether or not a subscriber has seen them. */
  listDeadLetters(options: ListDeadLettersOptions): Promise<DeadLetter[]>;
  /** The dead letter of this message, or undefined when there is none. */
  getDeadLetter(messageId: string): Promise<DeadLetter | undefined>;
  /**
   * Publish the dead letter's message again (to the same worker, delivery count starting from 1)
   * and remove the dead letter. Throws NotFoundError when there is none.
   */
  retryDeadLetter(messageId: string): Promise<DeadLetter>;
  /** Remove the dead letter for good; returns what was removed. Throws NotFoundError when there is none. */
  deleteDeadLetter(messageId: string): Promise<DeadLetter>;
  /**
   * Ring `workerId` (best effort, resolves once handed to the broker/database; no error when
   * nobody listens). Not durable: a worker not listening at that moment never gets it, so the
   * sender repeats it until it no longer applies. Every subscription of that worker id (in any
   * process) gets it. Throws InvalidEventError naming the field for a bad workerId or signal.
   */
  sendSignal(workerId: string, signal: WorkerSignal): Promise<void>;
  /**
   * Receive the signals addressed to `workerId` until stop(). Resolves once the subscription is
   * in place, so a signal sent after that reaches it (best effort: one sent while the connection
   * is down is lost). The handler must not throw (a throw is logged and ignored). Received
   * signals that do not parse are logged and dropped.
   */
  onSignal(workerId: string, handler: (signal: WorkerSignal) => void): Promise<SignalSubscription>;
  /** Also stops every consumer and subscription (work, dead letters, signals) of this instance. */
  close(): Promise<void>;
}
