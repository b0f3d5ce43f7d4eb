// The WorkTransport port: carries "run this execution" to the one worker that holds its baton.
// Adapters: NATS JetStream (production, ./nats.ts) and a Postgres queue (embedded, ./postgres.ts).
// Both pass test/contract/work-transport.contract.ts. NATS is a doorbell, not a record: the
// event store says who owns what; a lost message is re-published from the events.

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

export interface WorkTransportOptions {
  /** Redeliver a message not acked within this time (ms). Default 30,000. */
  ackWaitMs?: number;
  /** Deliver a message at most this many times. Default 5. */
  maxDeliver?: number;
}

export interface WorkTransport {
  /** Publish; resolves once the transport has stored every message (durable). Idempotent per messageId. */
  publish(messages: WorkMessage[]): Promise<void>;
  /**
   * Deliver messages addressed to `workerId` to `handler`, at most `concurrency` at a time.
   * The handler settles each delivery (ack/nak/term); one that throws or returns without
   * settling is nak'ed. Each message goes to one consumer at a time.
   */
  consume(workerId: string, handler: (delivery: Delivery) => Promise<void>, options: ConsumeOptions): Promise<Consumer>;
  /** Messages waiting for a worker (not yet acked), for metrics. */
  depth(workerId?: string): Promise<number>;
  close(): Promise<void>;
}
