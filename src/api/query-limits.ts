// The limits graphql-armor puts on a query, and how it refuses one over them. Armor's refusal
// begins `Syntax Error:` though the query is well formed (a client reading it looks for a typo),
// and is thrown out of validation. Here each validation limit reports its refusal as a validation
// error instead, without that prefix, with the code every refusal of the caller's input has
// (BAD_USER_INPUT), armor's own words (`Query Cost limit of 5000 exceeded, found 6123`) and what
// to do. The token limit stays armor's: it stops the parser, before there is a query to validate.
import type { GraphQLError, ValidationContext } from 'graphql';
import { codedError } from './errors.ts';

/** Armor's words without its `Syntax Error:` prefix, as a BAD_USER_INPUT naming the limit. */
export function limitRefusal(armor: GraphQLError): GraphQLError {
  const words = armor.message.replace(/^Syntax Error: /, '').replace(/\.$/, '');
  return codedError('BAD_USER_INPUT', `${words}: ask for fewer fields, aliases or smaller pages`, { limit: true }, armor);
}

/** A validation limit's options: refused as a validation error (limitRefusal), not thrown. */
const refusedAsValidation = <T extends object>(limit: T) => ({
  ...limit,
  propagateOnRejection: false,
  onReject: [(context: ValidationContext | null, armor: GraphQLError) => context?.reportError(limitRefusal(armor))],
});

// The deepest real query is 5 levels (executions.edges.node.events.type); 7 leaves room for
// fragments, which count as a level. Aliases: a dashboard needs a handful, not hundreds.
export const ARMOR = {
  maxDepth: refusedAsValidation({ n: 7 }),
  maxAliases: refusedAsValidation({ n: 15 }),
  maxTokens: { n: 2_000 },
  costLimit: refusedAsValidation({ maxCost: 5_000 }),
  maxDirectives: refusedAsValidation({ n: 20 }),
  blockFieldSuggestion: { enabled: true },
};
