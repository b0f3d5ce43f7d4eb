// The executable schema: the SDL in schemas/graphql/schema.graphql (the contract, read at
// startup so it stays one file that docs and clients can use) plus the resolvers.
import fs from 'node:fs/promises';
import type { GraphQLSchema } from 'graphql';
import { createSchema } from 'graphql-yoga';
import type { ApiContext } from './context.ts';
import { applyArgumentRules } from './argument-rules.ts';
import { resolvers } from './resolvers.ts';

export const SCHEMA_FILE = new URL('../../schemas/graphql/schema.graphql', import.meta.url);

export async function loadApiSchema(): Promise<GraphQLSchema> {
  const typeDefs = await fs.readFile(SCHEMA_FILE, 'utf8');
  // createSchema refuses a resolver for a field the SDL does not have, so the two cannot drift.
  return applyArgumentRules(createSchema<ApiContext>({ typeDefs, resolvers }));
}
