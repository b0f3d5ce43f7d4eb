// `baton workflow submit | status | cancel` as a user runs them (real processes), against an
// executor, orchestrator and worker running in this process: bad files and bad definitions are
// refused with their line/column or field paths and write nothing; a good one runs to the end.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { stringify as toYaml } from 'yaml';
import { runBaton } from '../support/cli.ts';
import { badWorkflows, startWorkflowCluster, type WorkflowCluster } from '../support/workflow-cluster.ts';

const natsUrl = inject('natsUrl');

describe('baton workflow', () => {
  let c: WorkflowCluster;
  let dir: string;
  beforeAll(async () => {
    c = await startWorkflowCluster({ natsUrl });
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-wf-cli-'));
  });
  afterAll(async () => {
    await c?.close();
    if (dir) await fs.rm(dir, { recursive: true, force: true });
  });
  const baton = (...args: string[]) => runBaton(args, { databaseUrl: c.db.url });
  const file = async (name: string, text: string) => {
    const p = path.join(dir, name);
    await fs.writeFile(p, text);
    return p;
  };
  /** Workflow and execution events (the worker's own stream has its WorkerStarted). */
  const eventCount = async () => (await c.db.pool.query(`SELECT count(*)::int AS n FROM baton_events WHERE stream_id NOT LIKE 'worker-%'`)).rows[0].n as number;

  it('refuses every bad definition, one problem per line with its path, and writes nothing', async () => {
    for (const [i, bad] of badWorkflows.entries()) {
      const p = await file(`bad-${i}.${i % 2 ? 'json' : 'yaml'}`, i % 2 ? JSON.stringify(bad.definition, null, 2) : toYaml(bad.definition));
      const r = await baton('workflow', 'submit', p);
      expect(r.code, bad.name).toBe(1);
      expect(r.stderr, bad.name).toMatch(new RegExp(`^baton: ${p.replace(/[.]/g, '\\.')} is not a valid workflow \\(1 problem; nothing was submitted\\):\\n  ${bad.expect.source}`));
      expect(r.stdout).toBe('');
    }
    expect(await eventCount()).toBe(0);
  }, 60_000);

  it('names the line and column of a syntax error (YAML and JSON)', async () => {
    const yaml = await file('broken.yaml', 'steps:\n  - id: a\n    action: core.noop\n  - id: b\n    action: [core.noop\n');
    const r = await baton('workflow', 'submit', yaml);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`^baton: ${yaml.replace(/[.]/g, '\\.')}:\\d+:\\d+: invalid YAML: `));
    const json = await file('broken.json', '{\n  "steps": [\n    { "id": "a", "action": "core.noop", }\n  ]\n}\n');
    const j = await baton('workflow', 'submit', json);
    expect(j.code).toBe(1);
    expect(j.stderr).toContain(`baton: ${json}:3:41: invalid JSON: Expected double-quoted property name`);
    expect((await baton('workflow', 'status', 'not a valid id')).stderr).toMatch(/workflow id must start with a letter or digit/);
    expect(await eventCount()).toBe(0);
  });

  it('submits a YAML workflow, waits for it, shows its steps; cancelling it then is too late', async () => {
    const p = await file('report.yaml', [
      'name: report',
      'steps:',
      '  - id: fetch',
      '    action: core.echo',
      '    input: { rows: 3 }',
      '  - id: render',
      '    action: core.echo',
      '    dependsOn: [fetch]',
      '    inputFrom: { rows: fetch.result.rows }',
      '',
    ].join('\n'));
    const r = await baton('workflow', 'submit', p, '--id', 'report-1', '--wait');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^workflow\s+report-1\nname\s+report\nnamespace\s+default\nstatus\s+Completed\n/);
    expect(r.stdout).toMatch(/STEP\s+ACTION\s+STATUS\s+ATTEMPTS\s+EXECUTION\nfetch\s+core\.echo\s+Completed\s+1\/3\s+[0-9a-f-]{36}\nrender\s+core\.echo\s+Completed\s+1\/3\s+[0-9a-f-]{36}/);
    const again = await baton('workflow', 'submit', p, '--id', 'report-1');
    expect(again.stdout).toBe('already submitted (same id): report-1 (2 steps, Completed)\n');
    // With --wait --json, `created` says it was found under its id, as without --wait.
    const waited = await baton('workflow', 'submit', p, '--id', 'report-1', '--wait', '--json');
    expect(JSON.parse(waited.stdout)).toMatchObject({ created: false, workflowId: 'report-1', namespace: 'default', status: 'Completed' });
    const status = await baton('workflow', 'status', 'report-1', '--json');
    expect(JSON.parse(status.stdout)).toMatchObject({ workflowId: 'report-1', status: 'Completed', steps: [{ id: 'fetch', result: { rows: 3 } }, { id: 'render', result: { rows: 3 }, execution: { status: 'Completed' } }] });
    const cancel = await baton('workflow', 'cancel', 'report-1');
    expect(cancel.code).toBe(1);
    expect(cancel.stderr).toBe('baton: workflow report-1 is already Completed; there is nothing to cancel\n');
    // `baton cancel` takes a workflow id too.
    const plain = await baton('cancel', 'report-1');
    expect(plain.code).toBe(1);
    expect(plain.stderr).toBe('baton: workflow report-1 is already Completed; there is nothing to cancel\n');
    const missing = await baton('workflow', 'status', 'nope');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe('baton: workflow nope not found\n');
  }, 60_000);
});
