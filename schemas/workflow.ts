// A workflow definition: a DAG of steps, each an action run as an ordinary execution. A step
// starts when all its parents completed; its input may take values from their results.
// `checkWorkflow` finds every problem of a definition before anything is written: bad fields,
// duplicate ids, unknown actions, missing or self dependencies, cycles (with the path).
import { z } from 'zod';
import { WORKFLOW_ID_MAX_LENGTH, WORKFLOW_ID_PATTERN, WORKFLOW_ID_RULE } from './workflow-id.ts';

/** A workflow's id: a UUID by default, or one the submitter chose (which makes submitting idempotent). */
export const WorkflowId = z.string().min(1).max(WORKFLOW_ID_MAX_LENGTH).regex(WORKFLOW_ID_PATTERN, WORKFLOW_ID_RULE);

export const StepId = z
  .string()
  .min(1)
  .max(100)
  .regex(/^[A-Za-z0-9_-]+$/, 'may contain only letters, digits, _ and -');

/** `<parent step id>.result[.path…]`: a value from a parent's result. */
const ResultRef = z.string().regex(/^[A-Za-z0-9_-]+\.result(\.[A-Za-z0-9_-]+)*$/, 'must look like "<step>.result" or "<step>.result.<field>…"');

export const WorkflowStep = z.object({
  id: StepId,
  action: z.string().min(1).max(200),
  input: z.json().optional(),
  /** Steps that must complete before this one starts. */
  dependsOn: z.array(StepId).max(1000).default([]),
  /** Input keys filled from parents' results: `{ "image": "resize.result.url" }`. */
  inputFrom: z.record(z.string().min(1), ResultRef).optional(),
  maxAttempts: z.number().int().min(1).max(1000).optional(),
  priority: z.number().int().optional(),
});
export type WorkflowStep = z.infer<typeof WorkflowStep>;

export const FailurePolicy = z.enum(['fail-fast', 'continue']);

export const WorkflowDefinition = z.object({
  name: z.string().min(1).max(200).optional(),
  /** fail-fast: the first failure cancels the rest. continue: branches not depending on it go on. */
  onFailure: FailurePolicy.default('fail-fast'),
  steps: z.array(WorkflowStep).min(1, 'a workflow needs at least one step').max(1000),
});
export type WorkflowDefinition = z.infer<typeof WorkflowDefinition>;

export type WorkflowProblem = { path: string; message: string };
export type WorkflowCheck = { ok: true; definition: WorkflowDefinition } | { ok: false; problems: WorkflowProblem[] };

/**
 * Parse and check a definition. `knownActions`, when given, is every action some worker offers.
 * Every problem is listed, each with its field path, so one round trip fixes them all.
 */
export function checkWorkflow(value: unknown, knownActions?: ReadonlySet<string>): WorkflowCheck {
  const parsed = WorkflowDefinition.safeParse(value);
  if (!parsed.success) {
    return { ok: false, problems: parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })) };
  }
  const def = parsed.data;
  const problems: WorkflowProblem[] = [];
  const index = new Map<string, number>();
  def.steps.forEach((step, i) => {
    if (index.has(step.id)) problems.push({ path: `steps.${i}.id`, message: `"${step.id}" is already the id of steps.${index.get(step.id)}` });
    else index.set(step.id, i);
  });
  def.steps.forEach((step, i) => {
    if (knownActions && !knownActions.has(step.action)) problems.push({ path: `steps.${i}.action`, message: `unknown action "${step.action}"` });
    step.dependsOn.forEach((parent, j) => {
      if (parent === step.id) problems.push({ path: `steps.${i}.dependsOn.${j}`, message: `step "${step.id}" depends on itself` });
      else if (!index.has(parent)) problems.push({ path: `steps.${i}.dependsOn.${j}`, message: `no step "${parent}" in this workflow` });
    });
    for (const [key, ref] of Object.entries(step.inputFrom ?? {})) {
      const parent = ref.split('.')[0]!;
      if (!step.dependsOn.includes(parent)) problems.push({ path: `steps.${i}.inputFrom.${key}`, message: `"${ref}" names "${parent}", which is not in dependsOn` });
    }
  });
  const cycle = findCycle(def.steps);
  if (cycle) problems.push({ path: 'steps', message: `dependency cycle: ${cycle.join(' → ')}` });
  return problems.length > 0 ? { ok: false, problems } : { ok: true, definition: def };
}

/** One dependency cycle as a path that ends where it starts, or null. Self-references are reported apart. */
export function findCycle(steps: readonly Pick<WorkflowStep, 'id' | 'dependsOn'>[]): string[] | null {
  const parents = new Map(steps.map((s) => [s.id, s.dependsOn.filter((p) => p !== s.id)]));
  const state = new Map<string, 'visiting' | 'done'>();
  const stack: string[] = [];
  const visit = (id: string): string[] | null => {
    if (state.get(id) === 'done' || !parents.has(id)) return null;
    if (state.get(id) === 'visiting') return [...stack.slice(stack.indexOf(id)), id];
    state.set(id, 'visiting');
    stack.push(id);
    for (const parent of parents.get(id)!) {
      const cycle = visit(parent);
      if (cycle) return cycle;
    }
    stack.pop();
    state.set(id, 'done');
    return null;
  };
  for (const s of steps) {
    const cycle = visit(s.id);
    // Walked child → parent; reverse so the path reads in the order steps run.
    if (cycle) return cycle.reverse();
  }
  return null;
}

/** A step's input: its own, with `inputFrom` keys filled from its parents' results. */
export function stepInput(step: WorkflowStep, results: ReadonlyMap<string, unknown>): unknown {
  if (!step.inputFrom) return step.input ?? null;
  const base = step.input && typeof step.input === 'object' && !Array.isArray(step.input) ? { ...step.input } : {};
  for (const [key, ref] of Object.entries(step.inputFrom)) {
    const [parent, , ...path] = ref.split('.');
    let value: unknown = results.get(parent!);
    for (const segment of path) value = value !== null && typeof value === 'object' ? (value as Record<string, unknown>)[segment] : undefined;
    (base as Record<string, unknown>)[key] = value ?? null;
  }
  return base;
}
