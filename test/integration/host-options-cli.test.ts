// The long-running commands' options are checked before anything starts: a worker id the event
// catalog would refuse (it failed only at the worker's first heartbeat, after connecting), and a
// drain timeout or a --wait timeout past 7 days (a timer past 2^31-1 ms fires at once, so it
// would not wait at all), a capacity past WorkerStarted's, ports not written in digits.
import { describe, expect, it } from 'vitest';
import { runBaton } from '../support/cli.ts';

// No database is needed: each is refused while its options are read. An unreachable URL makes sure.
const NOWHERE = 'postgres://nobody@127.0.0.1:1/none';

describe('host and wait options', () => {
  it.each([
    [['worker', '--id', 'a b'], /option '--id <id>' argument 'a b' is invalid\. may contain only letters, digits and \. _ : - \(1 to 200 characters\)/],
    [['worker', '--id', 'x'.repeat(201)], /option '--id <id>' argument 'x+' is invalid\./],
    [['worker', '--shutdown-timeout', '99999999999'], /option '--shutdown-timeout <ms>' argument '99999999999' is invalid\. must be a whole number of milliseconds from 1 to 604800000 \(7 days\)/],
    [['worker', '--shutdown-timeout', '99999999999999999'], /argument '99999999999999999' is invalid\. must be a whole number of milliseconds from 1 to 604800000 \(7 days\)/],
    [['dev', '--shutdown-timeout', '604800001'], /option '--shutdown-timeout <ms>' argument '604800001' is invalid\. must be a whole number of milliseconds from 1 to 604800000/],
    // A worker's capacity is WorkerStarted's (at most 100,000), refused before connecting: past 2^31
    // it was Postgres's out-of-range error, below it an invalid WorkerStarted event.
    [['worker', '--capacity', '100001'], /option '--capacity <n>' argument '100001' is invalid\. must be an integer from 1 to 100000/],
    [['worker', '--capacity', '9007199254740991'], /option '--capacity <n>' argument '9007199254740991' is invalid\./],
    [['dev', '--capacity', '2147483648'], /option '--capacity <n>' argument '2147483648' is invalid\./],
    // Ports in digits: '' and ' ' were read as 0 (a random port), 0x2F as 47.
    [['worker', '--metrics-port', ''], /option '--metrics-port <port>' argument '' is invalid\. must be a port number/],
    [['worker', '--metrics-port', ' '], /option '--metrics-port <port>' argument ' ' is invalid\./],
    [['api', '--port', '0x2F'], /option '--port <port>' argument '0x2F' is invalid\. must be a port number/],
    [['executor', '--metrics-host', 'bad host'], /option '--metrics-host <address>' argument 'bad host' is invalid\. must be an IP address or a host name/],
    // One port for two servers: refused before the database is opened (it blamed "another program", itself).
    [['dev', '--port', '47510', '--metrics-port', '47510'], /^baton: --port and --metrics-port are both 47510: the GraphQL API and the \/healthz and \/metrics server need a port each$/m],
    [['api', '--port', '47511', '--metrics-port', '47511'], /^baton: --port and --metrics-port are both 47511: /m],
    // An actions module that does not load is refused before the database is opened (it came after migrating it).
    [['worker', '--actions', './no-such-actions.ts'], /^baton: actions module not found: \S*no-such-actions\.ts/m],
    [['dev', '--actions', './no-such-actions.ts'], /^baton: actions module not found: \S*no-such-actions\.ts/m],
    [['api', '--actions', './no-such-actions.ts'], /^baton: actions module not found: \S*no-such-actions\.ts/m],
    // Past 2^31-1 ms Node's timer fired at once: the wait gave up at once.
    [['submit', 'core.noop', '--wait', '--timeout', '3000000000'], /option '--timeout <ms>' argument '3000000000' is invalid\. must be a whole number of milliseconds from 1 to 604800000/],
    [['cancel', '01a22d24-9be0-7000-8000-000000000000', '--wait', '--timeout', '1e12'], /option '--timeout <ms>' argument '1e12' is invalid\./],
    [['workflow', 'submit', 'x.yaml', '--wait', '--timeout', '2147483648'], /option '--timeout <ms>' argument '2147483648' is invalid\./],
  ])('refuses %j before starting', async (args, message) => {
    const r = await runBaton(args, { databaseUrl: NOWHERE });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(message);
    expect(r.stdout).toBe('');
  });
});
