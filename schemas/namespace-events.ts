// The namespace catalog: one stream per namespace (`namespace-<name>`), created on first use by
// whoever submits into it, so the history shows when each namespace came to be. Its one event is
// appended with a fixed event id at "no stream yet": a second creation, in this process or any
// other, finds the first and writes nothing.
import { z } from 'zod';
import { EventMetadata, Namespace } from './events.ts';

export const NamespaceCreated = z.object({
  type: z.literal('NamespaceCreated'),
  data: z.strictObject({ namespace: Namespace }),
  metadata: EventMetadata,
});
export type NamespaceCreated = z.infer<typeof NamespaceCreated>;

export const NAMESPACE_STREAM_PREFIX = 'namespace-';
export const namespaceStreamId = (name: string) => `${NAMESPACE_STREAM_PREFIX}${name}`;
export const namespaceOfStream = (streamId: string): string | undefined =>
  streamId.startsWith(NAMESPACE_STREAM_PREFIX) && streamId.length > NAMESPACE_STREAM_PREFIX.length ? streamId.slice(NAMESPACE_STREAM_PREFIX.length) : undefined;
