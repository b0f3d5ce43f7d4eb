// Workflow definition files: what YAML means nothing Baton can run is refused in one line naming
// the file (and the place, when there is one), never a stack trace or a warning and a run.
import { describe, expect, it } from 'vitest';
import { DefinitionFileError, parseDefinitionText } from '../../src/workflow/definition-file.ts';

const refusal = (text: string) => {
  try {
    parseDefinitionText(text, 'flow.yaml');
  } catch (err) {
    return err;
  }
  return undefined;
};

describe('parseDefinitionText (YAML)', () => {
  it('refuses an alias bomb (aliases of aliases) as invalid YAML, not with the parser\'s stack', () => {
    const levels = ['a: &a ["x","x","x","x","x","x","x","x","x"]'];
    for (const [prev, name] of [['a', 'b'], ['b', 'c'], ['c', 'd'], ['d', 'e'], ['e', 'f'], ['f', 'g']]) levels.push(`${name}: &${name} [${Array(9).fill(`*${prev}`).join(',')}]`);
    const err = refusal(`${levels.join('\n')}\nsteps: [{id: a, action: core.noop}]\n`);
    expect(err).toBeInstanceOf(DefinitionFileError);
    expect((err as Error).message).toBe('flow.yaml: invalid YAML: Excessive alias count indicates a resource exhaustion attack');
  });

  it('refuses a tag it does not know (read as text otherwise, after a printed warning), naming its line and column', () => {
    const err = refusal('steps:\n  - id: a\n    action: core.noop\n    input: !!js/function "function(){}"\n');
    expect(err).toBeInstanceOf(DefinitionFileError);
    expect((err as Error).message).toBe('flow.yaml:4:12: invalid YAML: Unresolved tag: tag:yaml.org,2002:js/function');
  });

  it('still reads a plain definition, and names a syntax error\'s place', () => {
    expect(parseDefinitionText('steps:\n  - id: a\n    action: core.noop\n', 'flow.yaml')).toEqual({ steps: [{ id: 'a', action: 'core.noop' }] });
    expect((refusal('steps: [\n') as Error).message).toMatch(/^flow\.yaml:\d+:\d+: invalid YAML: /);
  });
});
