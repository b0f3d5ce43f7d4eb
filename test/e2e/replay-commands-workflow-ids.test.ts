// `baton inspect | export | replay` given a workflow's id or a workflow's archive file, as a user
// runs them (real processes): they say it is a workflow and where to look, as `baton status`
// and `baton workflow status` do, never "execution … not found" or a schema error. Also: every
// uuid the other front doors take is an id here (of any version), and `export --json` is
// accepted (export prints JSON anyway). The retention run that archives the workflow counts it in the singular.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { executionArchivePath, workflowArchivePath } from '../../src/retention/archive-file.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { createWorkflowRuntime } from '../../src/workflow/workflow-stream.ts';
import { runBaton, type CliResult } from '../support/cli.ts';
import { catchUpFully } from '../support/read-model.ts';
import { startChainWorkflow } from '../support/chain-workflow.ts';
import { useTestStore } from '../support/test-store.ts';

const t = useTestStore();
let runtime: ExecutionRuntime;
let archiveDir: string;
let archived: { id: string; executions: string[] };
let live: { id: string; executions: string[] };
let plain: string;
let retention: CliResult;

const baton = (args: string[]): Promise<CliResult> => runBaton(args, { databaseUrl: t.db.url });
const deadline = () => new Date(Date.now() + 600_000).toISOString();

async function completed(workflowId?: string): Promise<string> {
  const { executionId } = await runtime.submit({ action: 'core.noop', input: null, ...(workflowId && { workflowId }) });
  await runtime.dispatch(executionId, [
    { type: 'SchedulingStarted', data: {}, by: 'executor' },
    { type: 'ExecutionHandedOff', data: { workerId: 'w1', attempt: 1, deadline: deadline() }, by: 'executor' },
  ]);
  await runtime.dispatch(executionId, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' });
  await runtime.dispatch(executionId, { type: 'ExecutionCompleted', data: { result: { ok: true } }, by: 'worker:w1' });
  return executionId;
}

/** A finished workflow of `steps` one-step chain, each step a completed execution. */
async function workflow(steps: string[]): Promise<{ id: string; executions: string[] }> {
  const id = await startChainWorkflow(t.store, steps);
  const workflows = createWorkflowRuntime(t.store);
  const executions: string[] = [];
  for (const stepId of steps) {
    const executionId = await completed(id);
    executions.push(executionId);
    await workflows.dispatch(id, { type: 'WorkflowStepScheduled', data: { stepId, executionId }, by: 'executor' });
    await workflows.dispatch(id, { type: 'WorkflowStepFinished', data: { stepId, executionId, outcome: 'Completed', result: { ok: true } }, by: 'executor' });
  }
  await workflows.dispatch(id, { type: 'WorkflowCompleted', data: {}, by: 'executor' });
  return { id, executions };
}

beforeAll(async () => {
  runtime = createExecutionRuntime(t.store);
  archiveDir = await mkdtemp(path.join(os.tmpdir(), 'baton-archive-'));
  archived = await workflow(['a', 'b']);
  plain = await completed();
  await catchUpFully(t.db.pool, t.store);
  // Finished an hour ago, as store and read model see it: archived by --older-than 1m without waiting.
  await t.db.pool.query("UPDATE baton_events SET recorded_at = recorded_at - interval '1 hour'");
  await t.db.pool.query("UPDATE baton_read.executions SET finished_at = finished_at - interval '1 hour'");
  retention = await runBaton(['retention', 'run', '--older-than', '1m', '--archive', archiveDir], { databaseUrl: t.db.url });
  expect(retention.code, retention.stderr).toBe(0);
  // `plain` went too; another is made below as an id nothing archived.
  plain = await completed();
  live = await workflow(['a']);
  await catchUpFully(t.db.pool, t.store);
});
afterAll(() => rm(archiveDir, { recursive: true, force: true }));

const commands = (id: string) => [['inspect', id], ['export', id], ['replay', id], ['inspect', id, '--json']];

it('the retention run that archived the workflow counts it in the singular', () => {
  // It said "(1 workflows)".
  expect(retention.stdout).toMatch(/^archived 3 executions and 1 workflow finished before \S+ \(\d+ events\) to /);
  expect(retention.stderr).toMatch(/: archived 3 executions \(1 workflow\), \d+ events, in /);
});

describe('a workflow id given where an execution id goes', () => {
  it('a live workflow is said to be one, pointing to `baton workflow status`, as `baton status` does', async () => {
    const expected = `baton: ${live.id} is a workflow, not an execution: run \`baton workflow status ${live.id}\`\n`;
    const all = [['status', live.id], ...commands(live.id)];
    const results = await Promise.all(all.map(baton));
    for (const [i, r] of results.entries()) {
      const args = all[i]!;
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr, args.join(' ')).toBe(expected);
    }
  });

  it('an archived workflow is said to be one, with the archive file that lists its steps', async () => {
    const file = workflowArchivePath(archiveDir, archived.id);
    // `baton status` and `baton events` too: they said "execution … not found".
    const all = [['status', archived.id], ['events', archived.id], ...commands(archived.id)];
    const results = await Promise.all(all.map(baton));
    for (const [i, r] of results.entries()) {
      const args = all[i]!;
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr, args.join(' ')).toMatch(
        new RegExp(`^baton: workflow ${archived.id} was archived at \\S+ \\(\\d+ events, into ${file}, which lists its steps' executions\\): \`baton inspect <execution id>\` reads each step from its own archive file\n$`),
      );
    }
  });

  it('a workflow id that is not a uuid is pointed to `baton workflow status`', async () => {
    const r = await baton(['inspect', 'nightly-2026-11-21']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/"nightly-2026-11-21" is not an execution id \(a uuid\); for a workflow, run `baton workflow status nightly-2026-11-21`/);
  });
});

describe("a workflow's archive file given to --file", () => {
  it('is said to be a workflow history, naming the execution ids its steps are inspected by', async () => {
    const file = workflowArchivePath(archiveDir, archived.id);
    expect(JSON.parse(await readFile(file, 'utf8'))).toMatchObject({ format: 'baton.workflow-history', executions: archived.executions });
    for (const args of [['replay', '--file', file], ['inspect', archived.id, '--file', file]]) {
      const r = await runBaton(args, { databaseUrl: null, cwd: archiveDir });
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr, args.join(' ')).toBe(
        `baton: history file ${file} is a workflow history of workflow "${archived.id}" (format baton.workflow-history), not an execution's: ` +
          "a workflow's steps are inspected by their execution ids (`baton inspect <execution id>`, or --file with the step's own archive file); " +
          `its steps are ${archived.executions.join(', ')}, each archived as execution-<id>.json beside it\n`,
      );
    }
    // … and a step is, by its id and its own file.
    const step = archived.executions[0]!;
    const r = await runBaton(['inspect', step, '--file', executionArchivePath(archiveDir, step), '--json'], { databaseUrl: null, cwd: archiveDir });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ executionId: step, state: 'Completed' });
  });
});

describe('ids and options the other commands take', () => {
  it('any uuid is an execution id (found or not), as at every other front door: not only the versions RFC 9562 defines', async () => {
    // Version digit 0 and variant 0: the uuid package's validate() refused it (the nil uuid it let through).
    const odd = '00000000-0000-0000-0000-000000000001';
    const all = [['inspect', odd], ['export', odd], ['replay', odd], ['status', odd], ['events', odd]];
    const results = await Promise.all(all.map(baton));
    for (const [i, r] of results.entries()) {
      const args = all[i]!;
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr, args.join(' ')).toBe(`baton: execution ${odd} not found\n`);
    }
  });

  it('export takes --json, and prints the same history with it', async () => {
    const [withJson, without] = await Promise.all([baton(['export', plain, '--json']), baton(['export', plain])]);
    expect(withJson.code, withJson.stderr).toBe(0);
    const strip = (r: CliResult) => ({ ...JSON.parse(r.stdout), exportedAt: undefined });
    expect(strip(withJson)).toEqual(strip(without));
    expect(strip(withJson)).toMatchObject({ format: 'baton.execution-history', executionId: plain });
  });
});
