// When a benchmark runs itself again in Node as deployed (src/bench/deployed-node.ts): only when
// no young-generation size was given, by flag or NODE_OPTIONS, in either spelling V8 takes.
import { describe, expect, it } from 'vitest';
import { DEPLOYED_NODE_FLAGS, youngGenerationSet } from '../../src/bench/deployed-node.ts';

describe('youngGenerationSet', () => {
  it('is false for Node’s defaults, whatever else was given', () => {
    expect(youngGenerationSet([], undefined)).toBe(false);
    expect(youngGenerationSet(['--enable-source-maps'], '--max-old-space-size=4096')).toBe(false);
    expect(youngGenerationSet([], '--max-semi-space-sizes=3')).toBe(false);
  });

  it('is true for the deployed flags and for a size the user chose, in a flag or NODE_OPTIONS', () => {
    expect(youngGenerationSet(DEPLOYED_NODE_FLAGS, undefined)).toBe(true);
    expect(youngGenerationSet(['--max-semi-space-size', '32'], undefined)).toBe(true);
    expect(youngGenerationSet([], '--inspect --max_semi_space_size=16')).toBe(true);
  });
});

describe('DEPLOYED_NODE_FLAGS', () => {
  it('are the flags the image gives every host', async () => {
    const { readFile } = await import('node:fs/promises');
    const dockerfile = await readFile(new URL('../../Dockerfile', import.meta.url), 'utf8');
    expect(dockerfile).toContain(`ENV NODE_OPTIONS=${DEPLOYED_NODE_FLAGS.join(' ')}\n`);
  });
});
