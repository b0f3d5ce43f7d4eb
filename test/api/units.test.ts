// The API's pure parts: outage detection and error masking, cursors, token checks, JSON sizes,
// stack redaction and subscription slots.
import { GraphQLError } from 'graphql';
import { describe, expect, it } from 'vitest';
import { createApiAuth, isLoopback } from '../../src/api/auth.ts';
import { decodeCursor, encodeCursor } from '../../src/api/cursor.ts';
import { badInput, isDatabaseUnavailable, maskApiError } from '../../src/api/errors.ts';
import { jsonSize } from '../../src/api/json-size.ts';
import { seesServerDetails, withoutStack } from '../../src/api/redact.ts';
import { createSubscriptionSlots } from '../../src/api/subscription-slots.ts';
import { IdempotencyKeyConflictError } from '../../src/errors.ts';

const pgError = (code: string, message = 'x') => Object.assign(new Error(message), { code });

describe('isDatabaseUnavailable', () => {
  it('knows connection failures, shutdowns and resource exhaustion', () => {
    for (const code of ['08006', '08001', '57P01', '57P03', '53300', '53100']) expect(isDatabaseUnavailable(pgError(code)), code).toBe(true);
    expect(isDatabaseUnavailable(Object.assign(new AggregateError([pgError('ECONNREFUSED')]), {}))).toBe(true);
    expect(isDatabaseUnavailable(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isDatabaseUnavailable(new Error('timeout exceeded when trying to connect'))).toBe(true);
    expect(isDatabaseUnavailable(new Error('wrapped', { cause: pgError('57P01') }))).toBe(true);
  });

  it('does not mistake query errors for an outage', () => {
    for (const code of ['42P01', '23505', '22P02', '40001', 'ENOENT']) expect(isDatabaseUnavailable(pgError(code)), code).toBe(false);
    expect(isDatabaseUnavailable(new Error('boom'))).toBe(false);
    expect(isDatabaseUnavailable(null)).toBe(false);
  });
});

describe('maskApiError', () => {
  const located = (originalError: Error) => new GraphQLError(originalError.message, { originalError, path: ['executions'] });

  it('turns an outage into SERVICE_UNAVAILABLE with HTTP 503, keeping the path', () => {
    const masked = maskApiError(located(pgError('57P01', 'terminating connection due to administrator command')), 'Unexpected error.') as GraphQLError;
    expect(masked.message).toBe('the database is unavailable; try again shortly');
    expect(masked.extensions).toMatchObject({ code: 'SERVICE_UNAVAILABLE', http: { status: 503 } });
    expect(masked.path).toEqual(['executions']);
  });

  it('gives Baton errors their codes and masks everything else', () => {
    expect((maskApiError(located(badInput('first', 'bad')), 'U') as GraphQLError).extensions).toMatchObject({ code: 'BAD_USER_INPUT', argument: 'first' });
    const conflict = maskApiError(located(new IdempotencyKeyConflictError('k', 'id-1', 'differs in input')), 'U') as GraphQLError;
    expect(conflict.extensions).toMatchObject({ code: 'IDEMPOTENCY_CONFLICT', executionId: 'id-1' });
    const sqlError = located(Object.assign(new Error('relation "baton_read.x" does not exist'), { code: '42P01' }));
    const masked = maskApiError(sqlError, 'Unexpected error.') as GraphQLError;
    expect(masked.message).toBe('Unexpected error.');
    expect(JSON.stringify(masked.toJSON())).not.toMatch(/relation|baton_read|stack/);
  });
});

describe('cursors', () => {
  it('round-trip a keyset position with microseconds', () => {
    const cursor = { requestedAt: '2030-01-01T00:00:00.123456Z', executionId: '6f1e7c52-3b0a-4d1e-9a57-0b8c4a2f9d31' };
    const encoded = encodeCursor(cursor);
    expect(encoded).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeCursor(encoded)).toEqual(cursor);
  });

  it('refuse a cursor with padding, another shape or another alphabet', () => {
    const good = encodeCursor({ requestedAt: '2030-01-01T00:00:00.000000Z', executionId: '6f1e7c52-3b0a-4d1e-9a57-0b8c4a2f9d31' });
    for (const bad of [`${good}=`, `+${good.slice(1)}`, '', Buffer.from('[]').toString('base64url')]) {
      expect(() => decodeCursor(bad), bad).toThrow(/^after: not a cursor from this API/);
    }
  });
});

describe('tokens', () => {
  const request = (authorization?: string) => new Request('http://x/graphql', { headers: authorization ? { authorization } : {} });

  it('grant admin, read or nothing; with no token configured, everyone is admin', () => {
    const auth = createApiAuth({ adminToken: 'a-token', readToken: 'r-token' });
    expect(auth.required).toBe(true);
    expect(auth.roleOf(request('Bearer a-token'))).toBe('admin');
    expect(auth.roleOf(request('bearer  r-token '))).toBe('read');
    for (const h of [undefined, 'Bearer', 'Bearer a-tokenx', 'Bearer a-token r-token', 'Token a-token', 'a-token']) {
      expect(auth.roleOf(request(h)), String(h)).toBeUndefined();
    }
    expect(createApiAuth({ readToken: 'r' }).roleOf(request('Bearer r'))).toBe('read');
    const open = createApiAuth({});
    expect(open.required).toBe(false);
    expect(open.roleOf(request())).toBe('admin');
  });

  it('know loopback hosts', () => {
    for (const h of ['127.0.0.1', '127.1.2.3', '::1', 'localhost', 'LOCALHOST']) expect(isLoopback(h), h).toBe(true);
    for (const h of ['0.0.0.0', '::', '10.0.0.1', 'example.com', '127.0.0.1.evil.com']) expect(isLoopback(h), h).toBe(false);
  });
});

describe('jsonSize', () => {
  it('is the UTF-8 length of JSON.stringify, escapes and all', () => {
    const values: unknown[] = [
      null, true, false, 0, -1.5, 1e21, Number.NaN, '', 'plain', 'quote " and \\ backslash', 'tab\tnew\nline\u0001',
      'é ü 中文 😀', '\ud800 lone', [], [1, 'two', null, undefined, () => 0], {}, { a: 1, b: undefined, c: [{ d: 'e' }] },
      { date: new Date(0) }, { nested: { deeper: { deepest: ['x'.repeat(1000)] } } },
    ];
    for (const v of values) expect(jsonSize(v), JSON.stringify(v)).toBe(Buffer.byteLength(JSON.stringify(v) ?? '', 'utf8'));
    expect(jsonSize(undefined)).toBe(0);
  });

  it('stops counting past a bound', () => {
    const big = { blob: 'x'.repeat(1_000_000), more: ['y'.repeat(1_000_000)] };
    const stopped = jsonSize(big, 10_000);
    expect(stopped).toBeGreaterThan(10_000);
    expect(stopped).toBeLessThan(jsonSize(big));
  });
});

describe('withoutStack', () => {
  it('drops only the stack of the ErrorInfo where the field keeps one, copying only what changes', () => {
    const untouched = { list: [1, 2], note: { message: 'mine', stack: 'mine too' } };
    const value = { error: { message: 'boom', type: 'Error', stack: 'at /srv/x.ts:1' }, untouched };
    const redacted = withoutStack(value, 'error-key') as typeof value;
    expect(redacted).toEqual({ error: { message: 'boom', type: 'Error' }, untouched });
    expect(redacted.untouched).toBe(untouched); // a user's own `stack` key is theirs
    expect(value.error.stack).toBe('at /srv/x.ts:1'); // the original is left alone
    expect(withoutStack(untouched, 'error-key')).toBe(untouched);
    expect(withoutStack(value.error, 'error')).toEqual({ message: 'boom', type: 'Error' });
    expect(withoutStack(null, 'error')).toBeNull();
    expect(withoutStack([value.error], 'error')).toEqual([value.error]); // not an ErrorInfo
  });

  it('is kept for the admin token not limited to namespaces', () => {
    expect(seesServerDetails({ role: 'admin' })).toBe(true);
    expect(seesServerDetails({ role: 'admin', namespaces: ['team-a'] })).toBe(false);
    expect(seesServerDetails({ role: 'read' })).toBe(false);
  });
});

describe('subscription slots', () => {
  it('cap each client and all of them, naming the variable, and free a slot once', () => {
    const slots = createSubscriptionSlots({ maxSubscriptions: 3, maxSubscriptionsPerClient: 2 });
    const a1 = slots.acquire('a');
    slots.acquire('a');
    expect(() => slots.acquire('a')).toThrow(/BATON_API_MAX_SUBSCRIPTIONS_PER_CLIENT/);
    slots.acquire('b');
    expect(() => slots.acquire('c')).toThrow(/the server has 3 subscriptions open.*BATON_API_MAX_SUBSCRIPTIONS\)/);
    a1();
    a1(); // twice frees one slot, not two
    expect(slots.open).toBe(2);
    slots.acquire('c');
    expect(() => slots.acquire('d')).toThrow(/BATON_API_MAX_SUBSCRIPTIONS\)/);
  });
});
