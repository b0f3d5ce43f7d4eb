// The regression-test helper users get: an exported history becomes a test in three lines.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test, expect } from 'vitest';
import { expectHistoryReplays } from '@baton-run/baton/testing';
import { MACHINE_VERSION } from '../../actors/execution.machine.ts';

test('an exported history still replays through the current machine', () => expectHistoryReplays('test/histories/report-completed.json'));

test('it fails, listing the divergence, when the machine no longer understands the history', async () => {
  await expect(expectHistoryReplays('test/histories/report-completed.json', { against: 'test/fixtures/machines/without-completion.machine.ts' })).rejects.toThrow(
    /does not replay:\n {2}\S+ @5 ExecutionCompleted: unhandled-event \(recorded: Completed, now: refused\)/,
  );
});

test('it checks the final state when asked, and names a missing file', async () => {
  await expect(expectHistoryReplays('test/histories/report-completed.json', { finalState: 'Completed' })).resolves.toHaveLength(6);
  await expect(expectHistoryReplays('test/histories/report-completed.json', { finalState: 'Failed' })).rejects.toThrow(/ends in Completed, not Failed/);
  await expect(expectHistoryReplays('test/histories/missing.json')).rejects.toThrow(/history file test\/histories\/missing.json cannot be read/);
});

test('it refuses an option it does not know, naming the one probably meant: a misspelt check must not pass unchecked', async () => {
  await expect(expectHistoryReplays('test/histories/report-completed.json', { finalstate: 'Failed' } as never)).rejects.toThrow(/options\.finalstate: unknown option; did you mean "finalState"\?/);
});

test('a machine module that cannot be imported is named as the option it came from, not as a CLI flag', async () => {
  await expect(expectHistoryReplays('test/histories/report-completed.json', { against: 'nonsense' })).rejects.toThrow(/^options\.against: nonsense: cannot import /);
});

test('a wrong options value is named as the option, never taken for a divergence of the history', async () => {
  const file = 'test/histories/report-completed.json';
  for (const against of [null, {}, 123]) {
    await expect(expectHistoryReplays(file, { against } as never), String(against)).rejects.toThrow(/^options\.against: must be 'current', 'recorded', a module path/);
  }
  for (const options of [null, 'x', []]) {
    await expect(expectHistoryReplays(file, options as never), String(options)).rejects.toThrow(/^options: must be an object/);
  }
  await expect(expectHistoryReplays(undefined as never)).rejects.toThrow(/^file: must be the path of an exported history/);
});

test('a history a newer Baton wrote fails as unreadable, saying to upgrade, never as an unhandled event', async () => {
  const doc = JSON.parse(await readFile('test/histories/report-completed.json', 'utf8'));
  const newer = String(Number(MACHINE_VERSION) + 1);
  for (const e of doc.events.slice(3)) e.metadata.machineVersion = newer;
  const dir = await mkdtemp(path.join(tmpdir(), 'baton-newer-history-'));
  try {
    const file = path.join(dir, 'newer.json');
    await writeFile(file, JSON.stringify(doc));
    for (const against of ['current', 'recorded']) {
      const failure = expectHistoryReplays(file, { against });
      await expect(failure, against).rejects.toThrow(
        `does not replay:\n  ${doc.executionId} @3 ExecutionStarted: unreadable: written by execution machine version ${newer}; this build of Baton knows versions 1–${MACHINE_VERSION}: upgrade Baton to read this history`,
      );
      await expect(expectHistoryReplays(file, { against }), against).rejects.not.toThrow(/unhandled-event/);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
