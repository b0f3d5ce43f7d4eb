// `baton submit` and the CLI's other options as a user runs them (real processes, real
// database): the CLI refuses what the API refuses, by the same rules (src/input) and the same
// submission check (src/runtime/submission.ts), on one line naming the option, exit 1, with
// nothing written; `--input null` stores JSON null; `--actions` makes a module's actions known.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { executionStreamId } from '../../schemas/events.ts';
import { createPostgresEventStore } from '../../src/eventstore/postgres.ts';
import { runBaton, type CliResult } from '../support/cli.ts';
import { useTestDatabase } from '../support/test-db.ts';

const db = useTestDatabase();
const baton = (...args: string[]): Promise<CliResult> => runBaton(args, { databaseUrl: db().url });
const eventCount = async () => (await db().pool.query('SELECT count(*)::int AS n FROM baton_events')).rows[0].n as number;

type Refusal = [args: string[], starts: string, message: RegExp];

/** Runs each at once (they are separate processes) and expects each refused; then that nothing was written. */
async function expectAllRefused(cases: Refusal[]): Promise<void> {
  const before = await eventCount();
  const results = await Promise.all(cases.map(([args]) => baton(...args)));
  results.forEach((r, i) => expectRefused(r, cases[i]![1], cases[i]![2]));
  expect(await eventCount()).toBe(before);
}

/** Exit 1 with exactly one line on stderr, `baton: <starts>…` matching `message`, and nothing on stdout. */
function expectRefused(r: CliResult, starts: string, message: RegExp): void {
  expect(r.code, r.stderr).toBe(1);
  expect(r.stdout).toBe('');
  const lines = r.stderr.trimEnd().split('\n');
  expect(lines, r.stderr).toHaveLength(1);
  expect(lines[0]!.startsWith(`baton: ${starts}`), lines[0]).toBe(true);
  expect(lines[0]).toMatch(message);
}

describe('baton submit', { timeout: 120_000 }, () => {
  it('refuses an unknown action and input its schema refuses, as submitExecution does; writes nothing', async () => {
    await expectAllRefused([
      [['submit', 'nope.nothing'], 'action: unknown action "nope.nothing"', /known actions: core\.echo, core\.fail, core\.noop, core\.sleep, http\.request$/],
      [['submit', 'core.slep', '--input', '{"ms":1}'], 'action: unknown action "core.slep"; did you mean "core.sleep"?', /known actions/],
      [['submit', 'core.sleep', '--input', '{"ms":"x"}'], 'invalid input for action core.sleep: input.ms:', /expected number, received string/],
    ]);
  });

  it('refuses the hostile JSON the API refuses: NUL and lone-surrogate escapes, deep nesting; and options out of range', async () => {
    await expectAllRefused([
      [['submit', 'core.echo', '--input', '{"a":{"b":"x\\u0000"}}'], '--input (at a.b): ', /must not contain a NUL character/],
      [['submit', 'core.echo', '--input', '{"k\\u0000":1}'], '--input (at k\\u0000): ', /key must not contain a NUL/],
      [['submit', 'core.echo', '--input', '["\\ud800"]'], '--input (at 0): ', /lone UTF-16 surrogate/],
      [['submit', 'core.echo', '--input', `${'['.repeat(5_000)}1${']'.repeat(5_000)}`], '--input (at 0.0.0', /nested deeper than 100 levels/],
      [['submit', 'core.echo', '--input', '{"a":'], '--input: not valid JSON', /JSON/],
      [['submit', 'core.echo', '--input', '{"a":{"b":1,"b":2}}'], '--input (at a.b): ', /appears twice in one object \(JSON would keep only the last\)/],
      [['submit', 'core.echo', '--key', 'k'.repeat(501)], '--key: ', /must be at most 500 characters \(got 501\)$/],
      [['submit', 'core.echo', '--max-attempts', '5000', '--priority', '2147483648'], '--max-attempts: must be from 1 to 1000 (got 5000); --priority: ', /must be from -2147483648 to 2147483647 \(got 2147483648\)$/],
    ]);
  });

  it('stores --input null as JSON null, and no --input as null too', async () => {
    for (const args of [['--input', 'null'], []]) {
      const r = await baton('submit', 'core.echo', ...args, '--json');
      expect(r.code, r.stderr).toBe(0);
      const { executionId } = JSON.parse(r.stdout) as { executionId: string };
      const [requested] = await createPostgresEventStore(db().pool).readStream(executionStreamId(executionId));
      expect(requested!.data).toMatchObject({ action: 'core.echo', input: null });
    }
  });

  it('knows the actions of the module given with --actions, and checks their input', async () => {
    const before = await eventCount();
    expectRefused(await baton('submit', 'billing.charge', '--input', '{"customerId":"c1","cents":5}'), 'action: unknown action "billing.charge"', /known actions/);
    expectRefused(await baton('submit', 'billing.charge', '--actions', './examples/actions.ts', '--input', '{"customerId":"c1","cents":-5}'), 'invalid input for action billing.charge: input.cents:', /Too small/);
    expect(await eventCount()).toBe(before);
    const ok = await baton('submit', 'billing.charge', '--actions', './examples/actions.ts', '--input', '{"customerId":"c1","cents":5}');
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/^submitted: [0-9a-f-]{36} \(Requested\)\n$/);
    expect(await eventCount()).toBe(before + 1);
  });
});

describe('baton submit --file', { timeout: 120_000 }, () => {
  const withFile = async (lines: string[], fn: (file: string) => Promise<void>) => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-submit-'));
    try {
      const file = path.join(dir, 'jobs.ndjson');
      await fs.writeFile(file, lines.join('\n'));
      await fn(file);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  };
  const store = () => createPostgresEventStore(db().pool);

  it('submits one execution per line in batches, with a summary; --tag adds to every line; again, the keys find them', async () => {
    const key = `file-${Date.now()}`;
    const lines = [
      JSON.stringify({ action: 'core.echo', input: { n: 1 }, idempotencyKey: `${key}-1`, tags: { customer: 'c-1' } }),
      '',
      JSON.stringify({ action: 'core.noop', priority: 5 }),
      JSON.stringify({ action: 'core.echo', input: { n: 1 }, idempotencyKey: `${key}-1`, tags: { customer: 'c-1' } }),
      JSON.stringify({ action: 'core.sleep', input: { ms: 1 }, maxAttempts: 2 }),
      JSON.stringify({ action: 'core.noop', idempotencyKey: `${key}-5` }),
    ];
    await withFile(lines, async (file) => {
      const before = await eventCount();
      const r = await baton('submit', '--file', file, '--batch-size', '2', '--tag', 'source=file', '--json');
      expect(r.code, r.stderr).toBe(0);
      const out = JSON.parse(r.stdout);
      expect(out).toMatchObject({ submitted: 5, created: 4, existing: 1, conflicts: [] });
      expect(out.executions.map((e: any) => e.line)).toEqual([1, 3, 4, 5, 6]);
      expect(out.executions[2]).toMatchObject({ executionId: out.executions[0].executionId, created: false });
      expect(await eventCount()).toBe(before + 4);
      const [first] = await store().readStream(executionStreamId(out.executions[0].executionId));
      expect(first!.data).toMatchObject({ action: 'core.echo', input: { n: 1 }, tags: { customer: 'c-1', source: 'file' } });

      const again = await baton('submit', '--file', file, '--tag', 'source=file');
      expect(again.code, again.stderr).toBe(0);
      expect(again.stdout).toMatch(/^submitted 5 lines in [\d.]+ s \([\d,]+\/s\): 2 created, 3 already submitted \(same idempotency key\), 0 refused\n$/);
      expect(again.stderr).toMatch(/^submitting .*jobs\.ndjson: 5 lines in [\d.]+ s\n$/);
      // Without the tag, the keyed lines ask for something else under their keys: each refused alone, the rest submitted.
      const changed = await baton('submit', '--file', file);
      expect(changed.code).toBe(1);
      expect(changed.stdout).toMatch(/: 2 created, 0 already submitted \(same idempotency key\), 3 refused\n  line 1: idempotency key "file-\d+-1" already used by execution [0-9a-f-]{36} with a different request \(differs in tags\)\n  line 4: .*\n  line 6: .*\(differs in tags\)\n$/);
    });
  });

  it('reads stdin with `-`', async () => {
    const r = await runBaton(['submit', '--file', '-', '--json'], { databaseUrl: db().url, stdin: `${JSON.stringify({ action: 'core.noop' })}\n${JSON.stringify({ action: 'core.noop' })}\n` });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ submitted: 2, created: 2 });
  });

  it('warns on stderr when a file or stdin holds no executions, and exits 0 (an empty export is not an error)', async () => {
    for (const [lines, why] of [[[], 'it is empty'], [['', '  ', ''], 'every line is blank']] as const) {
      await withFile([...lines], async (file) => {
        const before = await eventCount();
        const r = await baton('submit', '--file', file);
        expect(r.code, r.stderr).toBe(0);
        expect(r.stdout).toMatch(/^submitted 0 lines in /);
        expect(r.stderr).toContain(`warning: ${file} holds no executions (${why}): nothing was submitted`);
        expect(await eventCount()).toBe(before);
      });
    }
    for (const [stdin, why] of [['\n', 'every line is blank'], ['', 'it is empty']]) {
      const piped = await runBaton(['submit', '--file', '-', '--json'], { databaseUrl: db().url, stdin });
      expect(piped.code, piped.stderr).toBe(0);
      expect(JSON.parse(piped.stdout)).toMatchObject({ submitted: 0, created: 0 });
      expect(piped.stderr).toContain(`warning: stdin holds no executions (${why})`);
    }
  });

  it('refuses a bad line naming the line and the field; nothing of its batch is written, the batches before it are', async () => {
    const ok = JSON.stringify({ action: 'core.noop' });
    const cases: [string, RegExp][] = [
      [JSON.stringify({ action: 'core.sleep', input: { ms: -5 } }), /^baton: line 4: input\.ms: .*; nothing from line 3 on was written; lines 1–2 were submitted \(2 executions\)$/],
      [JSON.stringify({ action: 'core.noop', inptu: {} }), /^baton: line 4: inptu: unknown field; did you mean "input"\?; nothing from line 3 on was written/],
      [JSON.stringify({ action: 'core.noop', tags: { 'a b': 'x' } }), /^baton: line 4: tags\.a b: tag key "a b" may contain only/],
      ['{"action": "core.noop", "tags": {"__proto__": "x", "a": "b"}}', /^baton: line 4: tags\.__proto__: tag key "__proto__" is reserved/],
      [JSON.stringify({ action: 'core.noop', priority: 'high' }), /^baton: line 4: priority: must be from -2147483648 to 2147483647 \(got the string "high": a whole number is wanted\);/],
      [JSON.stringify({ input: {} }), /^baton: line 4: action: must be a string/],
      ['{"action": "core.noop"', /^baton: line 4: not valid JSON/],
      ['[1, 2]', /^baton: line 4: must be a JSON object/],
      [JSON.stringify({ action: 'core.echo', input: { a: 'x\u0000' } }), /^baton: line 4: input\.a: must not contain a NUL/],
      // JSON.parse would keep the last of two equal keys: run core.echo, with no word of it.
      ['{"action": "core.noop", "action": "core.echo"}', /^baton: line 4: action: appears twice in one object \(JSON would keep only the last\): give it once;/],
      ['{"action": "core.echo", "input": {"to": [{"a": 1, "a": 2}]}}', /^baton: line 4: input\.to\.0\.a: appears twice in one object/],
      [JSON.stringify({ action: 'core.noop', priority: 1.5 }), /^baton: line 4: priority: must be a whole number from -2147483648 to 2147483647 \(got 1\.5\);/],
    ];
    for (const [bad, message] of cases) {
      await withFile([ok, ok, ok, bad, ok], async (file) => {
        const before = await eventCount();
        const r = await baton('submit', '--file', file, '--batch-size', '2');
        expect(r.code, r.stderr).toBe(1);
        expect(r.stdout).toBe('');
        expect(r.stderr.trimEnd().split('\n'), r.stderr).toHaveLength(1);
        expect(r.stderr.trimEnd()).toMatch(message);
        expect(await eventCount()).toBe(before + 2);
      });
    }
  });

  it('refuses --file with an action or with one-submission options, and an unknown file', async () => {
    await withFile([JSON.stringify({ action: 'core.noop' })], async (file) => {
      await expectAllRefused([
        [['submit', 'core.noop', '--file', file], 'submit: give an action or --file, not both', /each line/],
        [['submit', '--file', file, '--input', '{}', '--key', 'k'], 'submit --file: --input, --key belong on each line', /not on the command line$/],
        [['submit', '--file', `${file}.missing`], '--file: ', /no such file$/],
        [['submit', '--tag', 'nokey'], '--tag: must be key=value', /customer=c-42/],
        [['submit', 'core.noop', '--tag', 'a=1', '--tag', 'a=2'], '--tag: tag "a" is given twice (a=1 and a=2)', /a key holds one value$/],
        [['submit', 'core.noop', '--tag', '__proto__=x'], '--tag: tag key "__proto__" is reserved', /choose another name$/],
        [['submit'], 'submit: give an action', /--file/],
      ]);
    });
  });
});

describe('the other commands’ options', { timeout: 120_000 }, () => {
  it('refuses absurd dates and positions past bigint, naming the option', async () => {
    await expectAllRefused([
      [['replay', '--all', '--since', '0000-01-01T00:00:00Z'], '--since: must be from 0001-01-01T00:00:00.000Z to 9999-12-31T23:59:59.999Z', /years 0001 to 9999/],
      [['inspect', '6f1e7c52-3b0a-4d1e-9a57-0b8c4a2f9d31', '--at', '2026-02-30T00:00:00Z'], '--at: not a real date', /: 2026-02 has no day 30$/],
      [['dlq', 'list', '--after', '9999999999999999999', '--transport', 'postgres'], '--after: must be a whole number from 0 to 9223372036854775807', /earlier page/],
      [['cancel', '6f1e7c52-3b0a-4d1e-9a57-0b8c4a2f9d31', '--reason', 'r'.repeat(1_001)], '--reason: must be at most 1000 characters', /\(got 1001\)$/],
    ]);
  });

  it('dlq says where it looked when it finds no dead letter: an operator without BATON_NATS_URL reads the Postgres queue', async () => {
    const list = await baton('dlq', 'list', '--transport', 'postgres');
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toBe("no dead letters in the Postgres work queue (a NATS installation's are read with BATON_NATS_URL set, or --transport nats)\n");
    const show = await baton('dlq', 'show', '6f1e7c52-3b0a-4d1e-9a57-0b8c4a2f9d31', '--transport', 'postgres');
    expect(show.code).toBe(1);
    expect(show.stderr).toMatch(/^baton: dead letter 6f1e7c52-3b0a-4d1e-9a57-0b8c4a2f9d31 not found in the Postgres work queue \(/);
  });

  it('refuses an unknown BATON_* variable, naming the one probably meant', async () => {
    const r = await runBaton(['submit', 'core.noop'], { databaseUrl: db().url, env: { BATON_MAX_ATEMPTS: '5' } });
    expectRefused(r, 'invalid configuration: BATON_MAX_ATEMPTS: unknown variable; did you mean "BATON_MAX_ATTEMPTS"?', /\?$/);
  });

  it('refuses a workflow file with misspelt fields and NUL escapes, every problem at once', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-input-'));
    try {
      const file = path.join(dir, 'typos.yaml');
      await fs.writeFile(file, ['steps:', '  - id: a', '    action: core.echo', '    input: { x: "\\0" }', '  - id: b', '    action: core.noop', '    dependOn: [a]', '    inputs: { y: 1 }', ''].join('\n'));
      const r = await baton('workflow', 'submit', file);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(
        [
          `baton: ${file} is not a valid workflow (3 problems; nothing was submitted):`,
          '  steps.0.input.x: must not contain a NUL character (\\u0000)',
          '  steps.1.dependOn: unknown field; did you mean "dependsOn"?',
          '  steps.1.inputs: unknown field; did you mean "input"?',
          '',
        ].join('\n'),
      );
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
  it('pins an action version with name@version or --action-version, shows it in status --json, and refuses a bad one naming the option', async () => {
    const pinned = await baton('submit', 'core.echo@2', '--json');
    expect(pinned.code, pinned.stderr).toBe(0);
    const { executionId, actionVersion } = JSON.parse(pinned.stdout) as { executionId: string; actionVersion: number };
    expect(actionVersion).toBe(2);
    const byOption = JSON.parse((await baton('submit', 'core.echo', '--action-version', '3', '--json')).stdout) as { executionId: string };
    const store = createPostgresEventStore(db().pool);
    expect((await store.readStream(executionStreamId(byOption.executionId)))[0]!.data).toMatchObject({ action: 'core.echo', actionVersion: 3 });
    const status = await baton('status', executionId, '--json');
    expect(JSON.parse(status.stdout)).toMatchObject({ status: 'Requested', actionVersion: 2, waiting: 'no live worker offers action "core.echo" at version 2 (pinned)' });
    await expectAllRefused([
      [['submit', 'core.echo', '--action-version', '0'], '--action-version: ', /whole number from 1 to 1000000/],
      [['submit', 'core.echo@x'], 'action: ', /the version after "@" must be a whole number/],
      [['submit', 'core.echo@2', '--action-version', '3'], '--action-version: ', /contradicts the version in action "core\.echo@2"/],
    ]);
  });
});
