// `baton schedule …` as a user runs it (real processes) against a test database: refusals name
// the option and write nothing; create, show --json (fired count, next fire times), list,
// pause, trigger, replay and delete with --json; the same problems GraphQL names, by option.
import { describe, expect, it } from 'vitest';
import { runBaton } from '../support/cli.ts';
import { catchUpFully } from '../support/read-model.ts';
import { useTestStore } from '../support/test-store.ts';

describe('baton schedule', () => {
  const t = useTestStore();
  const baton = (...args: string[]) => runBaton(['schedule', ...args], { databaseUrl: t.db.url });
  const json = async (...args: string[]) => {
    const r = await baton(...args, '--json');
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout);
  };
  const scheduleEvents = async () => (await t.db.pool.query(`SELECT count(*)::int AS n FROM baton_events WHERE stream_id LIKE 'schedule-%'`)).rows[0].n as number;

  it('refuses a bad schedule on one line naming each option, exit 1, nothing written', async () => {
    const r = await baton('create', '--cron', '0 25 * * *', '--tz', 'Mars/Olympus', '--action', 'core.nop', '--end', '2020-01-01T00:00:00Z', '--overlap', 'maybe');
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^baton: invalid schedule \(nothing was written\): --tz: unknown time zone "Mars\/Olympus".*; --cron: invalid cron expression: .*hour.*; --action: unknown action "core\.nop"; did you mean "core\.noop"\?.*; --overlap: must be one of skip, allow, cancel-previous, got "maybe"; --end: is in the past .*\n$/);
    const both = await baton('create', '--every', '10s', '--cron', '* * * * *', '--action', 'core.noop');
    expect(both.stderr).toMatch(/--every: give either --cron or --every, not both/);
    const input = await baton('create', '--every', '10s', '--action', 'core.sleep', '--input', '{"ms":"long"}', '--json');
    expect(input.code).toBe(1);
    expect(JSON.parse(input.stdout).problems[0].path).toBe('--input (at ms)');
    expect(await scheduleEvents()).toBe(0);
  }, 60_000);

  it('creates, shows with its fire count and next fire times, lists, pauses, triggers, replays and deletes (--json)', async () => {
    const created = await json('create', '--id', 'nightly', '--cron', '30 2 * * *', '--tz', 'Europe/Berlin', '--action', 'core.echo', '--input', '{"n":1}', '--catch-up', '1');
    expect(created).toMatchObject({ created: true, schedule: { scheduleId: 'nightly', status: 'Active', fired: 0, spec: { trigger: { kind: 'cron', cron: '30 2 * * *', timezone: 'Europe/Berlin' }, catchUp: 1, overlap: 'skip' } } });
    expect(created.schedule.nextFireTimes).toHaveLength(5);
    const triggered = await json('trigger', 'nightly');
    expect(triggered).toMatchObject({ scheduleId: 'nightly', started: true, target: { kind: 'action' } });
    const shown = await json('show', 'nightly');
    expect(shown).toMatchObject({ fired: 1, recent: [{ manual: true, target: triggered.target }] });
    expect(shown.nextFireTimes).toHaveLength(5);
    expect(await json('pause', 'nightly', '--reason', 'holiday')).toMatchObject({ changed: true, status: 'Paused' });
    await catchUpFully(t.db.pool, t.store);
    const listed = await json('list');
    expect(listed).toMatchObject({ schedules: [{ scheduleId: 'nightly', status: 'Paused', fired: 1, nextFireTimes: [] }], nextAfter: null });
    expect(await json('replay', 'nightly')).toMatchObject({ divergences: [], finalState: 'Paused' });
    expect(await json('delete', 'nightly')).toMatchObject({ changed: true, status: 'Deleted' });
    const again = await baton('trigger', 'nightly');
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^baton: schedule nightly is deleted; nothing to trigger\n$/);
    const missing = await baton('show', 'nope');
    expect(missing.stderr).toMatch(/^baton: schedule nope not found\n$/);
  }, 60_000);

  it('create takes BATON_NAMESPACE when given no --namespace, as submit does; --namespace wins; update keeps it', async () => {
    const inTeam = (...args: string[]) => runBaton(['schedule', ...args, '--json'], { databaseUrl: t.db.url, env: { BATON_NAMESPACE: 'team-z' } });
    const created = await inTeam('create', '--id', 'ns-env', '--every', '1h', '--action', 'core.noop');
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({ schedule: { spec: { namespace: 'team-z' } } });
    const given = await inTeam('create', '--id', 'ns-option', '--every', '1h', '--action', 'core.noop', '--namespace', 'team-y');
    expect(JSON.parse(given.stdout)).toMatchObject({ schedule: { spec: { namespace: 'team-y' } } });
    const updated = await runBaton(['schedule', 'update', 'ns-env', '--every', '2h', '--json'], { databaseUrl: t.db.url });
    expect(updated.code, updated.stderr).toBe(0);
    expect(JSON.parse(updated.stdout)).toMatchObject({ spec: { namespace: 'team-z' } });
  }, 60_000);
});
