// What `--against` names: `current` (this build's machine), `recorded` (the version each event
// was written by) or a module path exporting a candidate `executionMachine` (the deploy gate).
import path from 'node:path';
import type { AnyStateMachine } from 'xstate';
import { BatonError } from '../errors.ts';
import { importUserModule } from '../user-modules/import-module.ts';
import { CURRENT_MACHINE, RECORDED_MACHINES, type ReplayTarget } from './replay.ts';

const isMachine = (value: unknown): value is AnyStateMachine =>
  typeof value === 'object' && value !== null && typeof (value as AnyStateMachine).transition === 'function' && typeof (value as AnyStateMachine).root === 'object';

/** `label`: how the caller's option is named in messages (`--against` on the CLI, `against` in the library). */
export async function loadReplayTarget(spec: string, label = '--against'): Promise<ReplayTarget> {
  if (spec === 'current') return CURRENT_MACHINE;
  if (spec === 'recorded') return RECORDED_MACHINES;
  const file = path.resolve(spec);
  let module: Record<string, unknown>;
  try {
    module = await importUserModule(file);
  } catch (err) {
    throw new BatonError(`${label} ${spec}: cannot import ${file}: ${(err as Error).message}`, { cause: err });
  }
  const machine = module.executionMachine ?? module.default;
  if (!isMachine(machine)) {
    throw new BatonError(`${label} ${spec}: the module must export an xstate machine as \`executionMachine\` (or default); it exports ${Object.keys(module).join(', ') || 'nothing'}`);
  }
  const version = typeof module.MACHINE_VERSION === 'string' ? ` (version ${module.MACHINE_VERSION})` : '';
  return { kind: 'machine', machine, label: `${spec}${version}` };
}
