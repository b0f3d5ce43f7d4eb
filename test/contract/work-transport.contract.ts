// The WorkTransport contract: every adapter runs this suite unchanged.
//
// Timing: the suite runs with a 1 s ack-wait and max-deliver 3, so redelivery cases finish in
// about a second. Every wait is bounded (waitFor's timeout names what was missing). The only
// fixed waits are the windows that show something does NOT happen (no redelivery after an ack,
// none after max-deliver) and the lower bound of a nak delay; each says so where it sits.
//
// Dead letters: one suite-wide queue per harness, shared by every test, so each test looks only
// at its own messages (by messageId) in lists and in what onDeadLetter hands over.
//
// Signals: every test rings fresh worker ids, so it sees only its own signals. Absence is shown
// with a sentinel: a signal sent after the one that must not arrive, awaited where it must
// arrive; both adapters deliver one sender's signals to one listener in order.
//
// This file holds the suite's setup; its tests are in work-transport.contract-delivery.ts,
// -dead-letters.ts and -signals.ts, and what they share in work-transport.fixtures.ts.
import { afterAll, afterEach, beforeAll, describe } from 'vitest';
import type {
  Consumer,
  DeadLetter,
  DeadLetterSubscription,
  Delivery,
  SignalSubscription,
  WorkerSignal,
  WorkTransport,
  WorkTransportOptions,
} from '../../src/transport/work-transport.ts';
import { deadLetterTests } from './work-transport.contract-dead-letters.ts';
import { consumerTests, deliveryTests } from './work-transport.contract-delivery.ts';
import { signalTests } from './work-transport.contract-signals.ts';
import { OPTIONS } from './work-transport.fixtures.ts';

export { workerSignal, workMessage } from './work-transport.fixtures.ts';

export interface WorkTransportHarness {
  /**
   * A new transport instance over the same queue: as far as the adapter can tell, another process
   * (its own pool / listener). The harness closes every instance it opened in close().
   */
  open(options: WorkTransportOptions): Promise<WorkTransport>;
  /** Put `payload` on the wire where `workerId`'s signals travel, bypassing sendSignal's checks. */
  sendRawSignal(workerId: string, payload: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * What the parts of the suite get from its setup. `h` and `transport` are opened in beforeAll:
 * read them inside a test. What consume, subscribe and listen start is stopped after each
 * test, and the gates held() hands out are opened.
 */
export interface ContractSuite {
  readonly name: string;
  readonly h: WorkTransportHarness;
  readonly transport: WorkTransport;
  consume(t: WorkTransport, workerId: string, handler: (d: Delivery) => Promise<void>, concurrency?: number): Promise<Consumer>;
  subscribe(t: WorkTransport, handler: (d: DeadLetter) => Promise<void>): Promise<DeadLetterSubscription>;
  held(): ReturnType<typeof gate>;
  listen(t: WorkTransport, workerId: string, handler: (s: WorkerSignal) => void): Promise<SignalSubscription>;
}

/** A promise the test resolves by hand (to hold a handler open). */
function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}

export function workTransportContract(name: string, makeHarness: () => Promise<WorkTransportHarness>) {
  describe(`WorkTransport contract: ${name}`, () => {
    let h: WorkTransportHarness;
    let transport: WorkTransport;
    let started: (Consumer | DeadLetterSubscription | SignalSubscription)[] = [];
    let gates: { open: () => void }[] = [];

    beforeAll(async () => {
      h = await makeHarness();
      transport = await h.open(OPTIONS);
    });
    afterAll(async () => {
      await h?.close();
    });
    // No test may leave a consumer running: stop them all, and fail if one will not stop.
    afterEach(async () => {
      for (const g of gates) g.open();
      const stopping = Promise.all(started.map((c) => c.stop()));
      started = [];
      gates = [];
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        stopping,
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error('a consumer did not stop within 5 s after the test: a handler never returned')), 5_000);
        }),
      ]).finally(() => clearTimeout(timer));
    });

    const consume = async (t: WorkTransport, workerId: string, handler: (d: Delivery) => Promise<void>, concurrency = 2) => {
      const c = await t.consume(workerId, handler, { concurrency });
      started.push(c);
      return c;
    };
    /** onDeadLetter, stopped after the test like the consumers. */
    const subscribe = async (t: WorkTransport, handler: (d: DeadLetter) => Promise<void>) => {
      const s = await t.onDeadLetter(handler);
      started.push(s);
      return s;
    };
    const held = () => {
      const g = gate();
      gates.push(g);
      return g;
    };
    /** onSignal, stopped after the test like the consumers. */
    const listen = async (t: WorkTransport, workerId: string, handler: (s: WorkerSignal) => void) => {
      const s = await t.onSignal(workerId, handler);
      started.push(s);
      return s;
    };

    const suite: ContractSuite = {
      name,
      get h() {
        return h;
      },
      get transport() {
        return transport;
      },
      consume,
      subscribe,
      held,
      listen,
    };

    // The order of registration is the order the tests run in.
    deliveryTests(suite);
    deadLetterTests(suite);
    consumerTests(suite);
    signalTests(suite);
  });
}
