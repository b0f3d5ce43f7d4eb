#!/usr/bin/env node
// Baton's command line. TypeScript sources run through tsx, so there is no build step to forget.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/main.ts');
