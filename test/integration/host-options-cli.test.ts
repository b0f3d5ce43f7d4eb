// The long-running commands' options are checked before anything starts: a worker id the event
// catalog would refuse (it failed only at the worker's first heartbeat, after connecting), and a
// drain timeout past 7 days (a timer that long fires at once, so the drain would not wait at all).
import { describe, expect, it } from 'vitest';
import { runBaton } from '../support/cli.ts';

// No database is needed: each is refused while its options are read. An unreachable URL makes sure.
const NOWHERE = 'postgres://nobody@127.0.0.1:1/none';

describe('baton worker and baton dev options', () => {
  it.each([
    [['worker', '--id', 'a b'], /option '--id <id>' argument 'a b' is invalid\. may contain only letters, digits and \. _ : - \(1 to 200 characters\)/],
    [['worker', '--id', 'x'.repeat(201)], /option '--id <id>' argument 'x+' is invalid\./],
    [['worker', '--shutdown-timeout', '99999999999'], /option '--shutdown-timeout <ms>' argument '99999999999' is invalid\. must be at most 604800000 ms \(7 days\), got 99999999999/],
    [['dev', '--shutdown-timeout', '604800001'], /option '--shutdown-timeout <ms>' argument '604800001' is invalid\. must be at most 604800000 ms/],
  ])('refuses %j before starting', async (args, message) => {
    const r = await runBaton(args, { databaseUrl: NOWHERE });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(message);
    expect(r.stdout).toBe('');
  });
});
