// Stack traces are for admins. A failed action's ErrorInfo (`{ message, type, stack }`) reaches
// the API in Execution.error, ExecutionFailed's event data, the history's contexts, workflow
// steps and subscriptions; its stack names the server's files. Every JSON value a read-only
// client gets passes through here (response-budget.ts's boundedJson).

/** The value without `stack` in any object that has a string `message`; copies only what changes. */
export function withoutStacks(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    let out: unknown[] | undefined;
    value.forEach((item, i) => {
      const redacted = withoutStacks(item);
      if (redacted !== item) (out ??= value.slice())[i] = redacted;
    });
    return out ?? value;
  }
  const object = value as Record<string, unknown>;
  let out: Record<string, unknown> | undefined;
  for (const [key, item] of Object.entries(object)) {
    const redacted = withoutStacks(item);
    if (redacted !== item) (out ??= { ...object })[key] = redacted;
  }
  if (typeof object['message'] === 'string' && 'stack' in object) {
    out ??= { ...object };
    delete out['stack'];
  }
  return out ?? value;
}
