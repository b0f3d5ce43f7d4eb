// Component loggers: a part of a component names its path, and every line carries each key once
// (pino writes a repeated binding twice, and JSON parsers keep only the last).
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { componentLogger } from '../../src/log.ts';

function capture() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      done();
    },
  });
  return { log: pino({ level: 'info', base: { pid: 1 } }, stream), lines };
}

/** The keys of a JSON line in the order written, repeats included (JSON.parse would hide them). */
const keysOf = (line: string) => [...line.matchAll(/"([^"\\]+)":/g)].map((m) => m[1]);

describe('componentLogger', () => {
  it('writes a nested component as one path, with each key once', () => {
    const { log, lines } = capture();
    const dev = componentLogger(log, 'dev');
    const executor = componentLogger(dev, 'executor');
    componentLogger(executor, 'partitions').info('leases');
    const keys = keysOf(lines[0]!);
    expect(keys.filter((k) => k === 'component')).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ component: 'dev/executor/partitions', msg: 'leases' });
  });

  it("carries the bindings of the levels above, and a part's own", () => {
    const { log, lines } = capture();
    const worker = componentLogger(componentLogger(log, 'dev'), 'worker', { workerId: 'w-1' });
    componentLogger(worker, 'work-transport', { transport: 'postgres' }).warn('slow');
    expect(new Set(keysOf(lines[0]!)).size).toBe(keysOf(lines[0]!).length);
    expect(JSON.parse(lines[0]!)).toMatchObject({ component: 'dev/worker/work-transport', workerId: 'w-1', transport: 'postgres' });
  });

  it('keeps the bindings of a logger it did not make, and its level', () => {
    const { log, lines } = capture();
    const callers = log.child({ app: 'billing' });
    callers.level = 'warn';
    const part = componentLogger(callers, 'embedded-worker');
    part.info('dropped');
    part.warn('kept');
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ app: 'billing', component: 'embedded-worker', msg: 'kept' });
  });

  it('keeps what a plain child between two components adds: its bindings and its level', () => {
    const { log, lines } = capture();
    const quiet = componentLogger(log, 'test-setup').child({ run: 'r1' }, { level: 'warn' });
    const part = componentLogger(quiet, 'embedded-postgres');
    part.info('dropped');
    part.warn('kept');
    expect(lines).toHaveLength(1);
    expect(keysOf(lines[0]!).filter((k) => k === 'component')).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ component: 'test-setup/embedded-postgres', run: 'r1', msg: 'kept' });
  });
});
