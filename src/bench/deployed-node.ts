// Benchmarks run Node as the image runs every host (Dockerfile: NODE_OPTIONS), so what they
// measure is what is deployed: a young generation of 64 MB per semi-space instead of Node's
// default 16. The hosts make short-lived garbage at every step; with the default, scavenges took
// 12% of the `baton bench` process's samples, 6–9% with this. Measured in `baton bench` (20,000
// executions, four alternated pairs, 2026-11-25): 2,485 / 2,540 / 2,537 / 2,648 executions/s
// without, 2,515 / 2,851 / 2,839 / 2,915 with. V8 takes the size only at start
// (v8.setFlagsFromString is too late), so a bench started without it runs itself again with it.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BatonError } from '../errors.ts';

export const DEPLOYED_NODE_FLAGS = ['--max-semi-space-size=64'];

// V8 takes `--max-semi-space-size=N` and `--max_semi_space_size=N` alike.
const isSemiSpaceFlag = (flag: string) => /^--max[-_]semi[-_]space[-_]size(=|$)/.test(flag);
const flagsGiven = (execArgv: readonly string[], nodeOptions: string | undefined) => [...execArgv, ...(nodeOptions ?? '').split(/\s+/)];

/** Whether Node was started with a young generation of its own choosing (ours, or one the user gave). */
export const youngGenerationSet = (execArgv: readonly string[], nodeOptions: string | undefined): boolean => flagsGiven(execArgv, nodeOptions).some(isSemiSpaceFlag);

/** The young-generation flags this process runs with (reported with the results). */
export const nodeFlagsInUse = (): string[] => flagsGiven(process.execArgv, process.env.NODE_OPTIONS).filter(isSemiSpaceFlag);

/** The package's root: the nearest directory above this module with bin/baton.js (sources and dist/ alike). */
export function packageRoot(): string {
  for (let dir = path.dirname(fileURLToPath(import.meta.url)); ; dir = path.dirname(dir)) {
    if (fs.existsSync(path.join(dir, 'bin', 'baton.js'))) return dir;
    if (path.dirname(dir) === dir) throw new BatonError('cannot find bin/baton.js above the benchmark module');
  }
}

/**
 * Runs `bench` here when Node already runs as deployed; otherwise runs this same command again in
 * a child started with DEPLOYED_NODE_FLAGS (its output is this one's) and takes its exit code.
 */
export async function asDeployed(bench: () => Promise<void>): Promise<void> {
  if (youngGenerationSet(process.execArgv, process.env.NODE_OPTIONS)) return bench();
  const child = spawn(process.execPath, [...DEPLOYED_NODE_FLAGS, ...process.execArgv, ...process.argv.slice(1)], { stdio: 'inherit' });
  // A signal for this process is the child's too (a terminal's Ctrl-C reaches both already).
  const forward = (signal: NodeJS.Signals) => () => void child.kill(signal);
  const onInt = forward('SIGINT');
  const onTerm = forward('SIGTERM');
  process.on('SIGINT', onInt);
  process.on('SIGTERM', onTerm);
  try {
    const code = await new Promise<number>((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', (c, signal) => resolve(c ?? (signal ? 128 + os.constants.signals[signal] : 1)));
    });
    process.exitCode = code;
  } finally {
    process.off('SIGINT', onInt);
    process.off('SIGTERM', onTerm);
  }
}
