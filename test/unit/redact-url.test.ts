// Database URLs in messages and logs: the password goes, wherever the URL carries it.
import { describe, expect, it } from 'vitest';
import { redactUrl } from '../../src/db/connect.ts';

describe('redactUrl', () => {
  it('masks the password in the authority and in the query, as node-postgres reads both', () => {
    expect(redactUrl('postgres://baton:S3cret@db:5432/baton')).toBe('postgres://baton:***@db:5432/baton');
    expect(redactUrl('postgres://db:5432/baton?user=baton&password=S3cret')).toBe('postgres://db:5432/baton?user=baton&password=***');
    expect(redactUrl('postgres://db/baton?sslmode=require&sslpassword=K3y&application_name=x')).toBe('postgres://db/baton?sslmode=require&sslpassword=***&application_name=x');
    expect(redactUrl('postgres://db/baton?sslmode=require')).toBe('postgres://db/baton?sslmode=require');
    expect(redactUrl('not a url')).toBe('(unparseable url)');
  });
});

describe('lostConnection', () => {
  it('keeps what says what went wrong, and not the client node-postgres attaches (its statements and cancel key)', async () => {
    const { lostConnection } = await import('../../src/db/connect.ts');
    const err = Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01', client: { secretKey: 12345, parsedStatements: { s: 'SELECT 1' } } });
    expect(lostConnection(err)).toEqual({ type: 'Error', message: 'terminating connection due to administrator command', code: '57P01' });
    expect(JSON.stringify(lostConnection(err))).not.toMatch(/secretKey|SELECT/);
  });
});
