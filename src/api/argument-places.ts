// Where a value sits in a query document, named as the API names argument problems: the argument,
// then the input fields and list indexes under it (`filter.since`, `ids.0`). For refusals graphql
// makes before any resolver runs (input-problems.ts), which name no argument themselves.
import { BREAK, Kind, visit, type ASTNode, type DocumentNode } from 'graphql';

type Ancestor = ASTNode | readonly ASTNode[];

/**
 * The place of the node at the end of `chain` (visit()'s ancestors, then parent), whose keys
 * visit() gives as `path`: from the argument it is in (`$name` in a variable's default value).
 */
function placeIn(chain: readonly Ancestor[], path: readonly (string | number)[]): string | undefined {
  let place: string[] | undefined;
  chain.forEach((a, i) => {
    if (Array.isArray(a)) {
      const owner = chain[i - 1] as ASTNode | undefined;
      if (place && owner?.kind === Kind.LIST) place.push(String(path[i]));
      return;
    }
    const node = a as ASTNode;
    if (node.kind === Kind.ARGUMENT) place = [node.name.value];
    else if (node.kind === Kind.VARIABLE_DEFINITION) place = [`$${node.variable.name.value}`];
    else if (node.kind === Kind.OBJECT_FIELD) place?.push(node.name.value);
  });
  return place?.join('.');
}

/** The place of `target` (a value node of `document`), or undefined when it is not in an argument. */
export function placeOfNode(document: DocumentNode, target: ASTNode): string | undefined {
  let place: string | undefined;
  visit(document, {
    enter(node, _key, parent, path, ancestors) {
      if (node !== target) return undefined;
      place = placeIn([...ancestors, ...(parent ? [parent] : [])], path);
      return BREAK;
    },
  });
  return place;
}

/**
 * A variable's path (`f.since`) as the argument's (`filter.since`) when the variable is used in
 * one place only; else as it is: which use a client meant cannot be told.
 */
export function argumentPathOfVariable(document: DocumentNode, variablePath: string): string {
  const [name, ...rest] = variablePath.split('.');
  const places = new Set<string>();
  visit(document, {
    Variable(node, _key, parent, path, ancestors) {
      // Its declaration (`$f: ExecutionFilter`) is not a use.
      if (node.name.value !== name || (parent as ASTNode | undefined)?.kind === Kind.VARIABLE_DEFINITION) return;
      const place = placeIn([...ancestors, ...(parent ? [parent] : [])], path);
      if (place) places.add(place);
    },
  });
  return places.size === 1 ? [...places, ...rest].join('.') : variablePath;
}
