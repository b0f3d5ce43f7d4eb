// The rule for a workflow's id, without zod: the command line checks its arguments before it
// loads any schema (a zod import alone costs ~100 ms of a command's start). schemas/workflow.ts
// builds the WorkflowId schema from the same constants.

export const WORKFLOW_ID_MAX_LENGTH = 200;
export const WORKFLOW_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]*$/;
export const WORKFLOW_ID_RULE = 'must start with a letter or digit and contain only letters, digits and . _ : -';

/** Why `value` is not a workflow id, or undefined when it is one. */
export function workflowIdProblem(value: string): string | undefined {
  if (value.length > WORKFLOW_ID_MAX_LENGTH) return `must be at most ${WORKFLOW_ID_MAX_LENGTH} characters`;
  if (!WORKFLOW_ID_PATTERN.test(value)) return WORKFLOW_ID_RULE;
  return undefined;
}
