// Action versions outside the machine: defineAction's `version`, what a worker advertises, and
// the one rule every door parses `name@version` with.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ActionPolicy } from '../../schemas/worker-events.ts';
import { createActionRegistry, defineAction, InvalidActionDefinitionError } from '../../src/actions/index.ts';
import { actionVersionProblem, offeredNames, offeredVersion, splitActionRef } from '../../src/input/action-versions.ts';

const echo = (version?: number) => defineAction({ name: 'demo.echo', ...(version !== undefined && { version }), input: z.unknown(), run: (x) => x });

describe('defineAction({ version })', () => {
  it('keeps a declared version and leaves an undeclared one out (it means version 1)', () => {
    expect(echo(2).version).toBe(2);
    expect('version' in echo()).toBe(false);
  });

  it('refuses a version that is not a whole number from 1, naming the field', () => {
    for (const bad of [0, -1, 1.5, '2', 1_000_001, Number.NaN]) {
      expect(() => defineAction({ name: 'demo.echo', version: bad as number, input: z.unknown(), run: () => 1 })).toThrow(InvalidActionDefinitionError);
      expect(() => defineAction({ name: 'demo.echo', version: bad as number, input: z.unknown(), run: () => 1 })).toThrow(/version: must be a whole number from 1 to 1000000/);
    }
  });

  it('advertises the version in the policy and as name@version in the liveness names', () => {
    const registry = createActionRegistry([echo(3), defineAction({ name: 'demo.plain', input: z.unknown(), run: () => 1 })]);
    expect(registry.names()).toEqual(['demo.echo', 'demo.plain']);
    expect(registry.offers()).toEqual(['demo.echo', 'demo.echo@3', 'demo.plain']);
    expect(registry.policies()['demo.echo']).toMatchObject({ version: 3 });
    expect(registry.policies()['demo.plain']).not.toHaveProperty('version');
    expect(ActionPolicy.safeParse(registry.policies()['demo.echo']).success).toBe(true);
  });
});

describe('name@version', () => {
  it('splits a reference, and names a malformed version', () => {
    expect(splitActionRef('core.echo@2')).toEqual({ action: 'core.echo', version: 2 });
    expect(splitActionRef('core.echo')).toEqual({ action: 'core.echo' });
    for (const bad of ['core.echo@', 'core.echo@0', 'core.echo@v2', 'core.echo@1.5', 'core.echo@-1', 'core.echo@99999999']) {
      expect(splitActionRef(bad)).toEqual({ problem: expect.stringContaining('the version after "@" must be a whole number from 1 to 1000000') });
    }
  });

  it('reads the version a worker offers from its liveness names: name@N, else the bare name is 1', () => {
    expect(offeredVersion(offeredNames('a.b', 4), 'a.b')).toBe(4);
    expect(offeredVersion(offeredNames('a.b', undefined), 'a.b')).toBe(1);
    expect(offeredVersion(['a.bc@2', 'a.bc'], 'a.b')).toBeUndefined();
    expect(offeredVersion([], 'a.b')).toBeUndefined();
  });

  it('checks a version like every door does', () => {
    expect(actionVersionProblem(1)).toBeUndefined();
    expect(actionVersionProblem(0)).toMatch(/whole number from 1/);
    expect(actionVersionProblem('1')).toMatch(/whole number from 1/);
  });
});
