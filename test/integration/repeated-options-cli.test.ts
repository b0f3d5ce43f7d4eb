// A single-valued option given twice is refused across the CLI, naming it and both values:
// commander kept the last without a word (`baton list --status Completed --status Failed` listed
// Failed only). Options documented as repeatable (--tag, --event) still collect every value.
import { describe, expect, it } from 'vitest';
import { createPostgresEventStore } from '../../src/eventstore/postgres.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { runBaton } from '../support/cli.ts';
import { useTestDatabase } from '../support/test-db.ts';

const db = useTestDatabase();
const baton = (args: string[]) => runBaton(args, { databaseUrl: db().url });

describe('a single-valued option given twice', () => {
  it('is refused on any command, naming the option and both values (a password left out)', async () => {
    const id = (await createExecutionRuntime(createPostgresEventStore(db().pool)).submit({ action: 'core.noop' })).executionId;
    const [list, submit, inspect, copy] = await Promise.all([
      baton(['list', '--status', 'Completed', '--status', 'Failed']),
      baton(['submit', 'core.noop', '--priority', '1', '--json', '--priority', '2']),
      baton(['inspect', id, '--at', '0', '--at', '1']),
      baton(['eventstore', 'copy', '--from', 'postgres://u:secret@127.0.0.1:1/a', '--to', 'postgres://u@127.0.0.1:1/b', '--from', 'postgres://u:other@127.0.0.1:1/c']),
    ]);
    expect(list.code).toBe(1);
    expect(list.stderr).toBe('baton: --status given twice (Completed, Failed): give it once\n');
    expect(submit.code).toBe(1);
    expect(submit.stderr).toBe('baton: --priority given twice (1, 2): give it once\n');
    expect(inspect.code).toBe(1);
    expect(inspect.stderr).toBe('baton: --at given twice (0, 1): give it once\n');
    expect(copy.code).toBe(1);
    expect(copy.stderr).toBe('baton: --from given twice (postgres://u:***@127.0.0.1:1/a, postgres://u:***@127.0.0.1:1/c): give it once\n');
    expect(copy.stderr).not.toContain('secret');
  });

  it('leaves the repeatable ones collecting every value: --tag on submit, --event on inspect, and a flag given twice', async () => {
    const submitted = await baton(['submit', 'core.noop', '--tag', 'team=a', '--tag', 'run=r1', '--json']);
    expect(submitted.code, submitted.stderr).toBe(0);
    const { executionId } = JSON.parse(submitted.stdout) as { executionId: string };
    const forked = await baton(['inspect', executionId, '--fork-at', '0', '--event', '{"type":"ExecutionCancelled","data":{"reason":"one"}}', '--event', '{"type":"ExecutionCancelled","data":{"reason":"two"}}']);
    expect(forked.stdout).toMatch(/^\s*1\s+ExecutionCancelled/m);
    expect(forked.stdout).toMatch(/^\s*2\s+ExecutionCancelled/m);
    const flags = await baton(['status', executionId, '--json', '--json']);
    expect(flags.code, flags.stderr).toBe(0);
  });
});

describe("commander's own refusals", () => {
  it('show a control character in the argument they quote as an escape, never raw (an ESC would recolour the terminal)', async () => {
    const r = await baton(['inspect', 'abc\u0001def\u001b[31mRED']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("'abc\\u0001def\\u001b[31mRED'");
    expect(r.stderr).not.toMatch(/[\u0001\u001b]/);
  });
});
