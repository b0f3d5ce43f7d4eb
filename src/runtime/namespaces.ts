// Namespaces are created on first use (all but `default`, which always exists): before the first
// execution of a namespace is recorded, its stream gets NamespaceCreated
// (schemas/namespace-events.ts). Idempotent across processes:
// the event id derives from the name and the append expects no stream, so a race or a retry
// finds the first creation. A process remembers the namespaces it has seen, so this costs one
// append per namespace per process, not one per submission.
import { v5 as uuidv5 } from 'uuid';
import { namespaceStreamId } from '../../schemas/namespace-events.ts';
import { DuplicateEventIdError, WrongExpectedRevisionError } from '../errors.ts';
import type { EventStore } from '../eventstore/event-store.ts';

/** uuid v5 namespace of NamespaceCreated event ids. Never change it. */
const NAMESPACE_EVENTS = 'c0a3c1d2-5a8e-4f0b-9d4e-2b7f1e6a9c11';

export interface Namespaces {
  /** Create `name` unless it exists (checked before: see namespaceProblem). */
  ensure(name: string): Promise<void>;
}

export function createNamespaces(store: Pick<EventStore, 'append'>, clock: () => Date = () => new Date()): Namespaces {
  const known = new Set<string>();
  const pending = new Map<string, Promise<void>>();
  async function create(name: string): Promise<void> {
    const event = {
      eventId: uuidv5(`namespace:${name}`, NAMESPACE_EVENTS),
      type: 'NamespaceCreated',
      data: { namespace: name },
      metadata: { by: 'executor', occurredAt: clock().toISOString() },
    };
    try {
      await store.append(namespaceStreamId(name), [event], { expectedRevision: 'no_stream' });
    } catch (err) {
      if (!(err instanceof WrongExpectedRevisionError) && !(err instanceof DuplicateEventIdError)) throw err;
    }
    known.add(name);
  }
  return {
    async ensure(name) {
      if (known.has(name)) return;
      let p = pending.get(name);
      if (!p) pending.set(name, (p = create(name).finally(() => pending.delete(name))));
      await p;
    },
  };
}
