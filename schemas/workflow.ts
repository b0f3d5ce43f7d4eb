// A workflow definition: a DAG of steps, each an action run as an ordinary execution. A step
// starts when all its parents completed; its input may take values from their results.
// `checkWorkflow` finds every problem of a definition at once, before anything is written:
// unknown fields (with the name probably meant), bad values, duplicate ids, unknown actions,
// missing or self dependencies, cycles (with the path).
import { z } from 'zod';
import { WORKFLOW_ID_MAX_LENGTH, WORKFLOW_ID_PATTERN, WORKFLOW_ID_RULE } from './workflow-id.ts';
import { INT32 } from '../src/input/rules.ts';
import { jsonValue, protoKeyRefusal, text, withoutProtoKey, zodProblems } from '../src/input/schemas.ts';

/** A workflow's id: a UUID by default, or one the submitter chose (which makes submitting idempotent). */
export const WorkflowId = z.string().min(1).max(WORKFLOW_ID_MAX_LENGTH).regex(WORKFLOW_ID_PATTERN, WORKFLOW_ID_RULE);

export const StepId = z
  .string()
  .min(1)
  .max(100)
  .regex(/^[A-Za-z0-9_-]+$/, 'may contain only letters, digits, _ and -');

/** `<parent step id>.result[.path…]`: a value from a parent's result. */
const RESULT_REF = /^[A-Za-z0-9_-]+\.result(\.[A-Za-z0-9_-]+)*$/;
const ResultRef = text().regex(RESULT_REF, 'must look like "<step>.result" or "<step>.result.<field>…"');

// Strict: a misspelt field (`after`, `dependOn`, `inputs`) must not leave a step without its dependency or input.
export const WorkflowStep = z.strictObject({
  id: StepId,
  action: text().min(1).max(200),
  input: jsonValue().optional(),
  /** Steps that must complete before this one starts. */
  dependsOn: z.array(StepId).max(1000).default([]),
  /** Input keys filled from parents' results: `{ "image": "resize.result.url" }`. */
  inputFrom: withoutProtoKey(z.record(text().min(1), ResultRef), protoKeyRefusal('an input key filled from a parent')).optional(),
  maxAttempts: z.number().int().min(1).max(1000).optional(),
  priority: z.number().int().min(INT32.min).max(INT32.max).optional(),
});
export type WorkflowStep = z.infer<typeof WorkflowStep>;

export const FailurePolicy = z.enum(['fail-fast', 'continue']);

export const WorkflowDefinition = z.strictObject({
  name: text().min(1).max(200).optional(),
  /** fail-fast: the first failure cancels the rest. continue: branches not depending on it go on. */
  onFailure: FailurePolicy.default('fail-fast'),
  steps: z.array(WorkflowStep).min(1, 'a workflow needs at least one step').max(1000),
});
export type WorkflowDefinition = z.infer<typeof WorkflowDefinition>;

export type WorkflowProblem = { path: string; message: string };
export type WorkflowCheck = { ok: true; definition: WorkflowDefinition } | { ok: false; problems: WorkflowProblem[] };

/** Words people write for a field, mapped to the field they meant. */
const FIELD_ALIASES: Readonly<Record<string, string>> = {
  after: 'dependsOn',
  needs: 'dependsOn',
  requires: 'dependsOn',
  parents: 'dependsOn',
  with: 'input',
  params: 'input',
  args: 'input',
  arguments: 'input',
  uses: 'action',
  run: 'action',
  retries: 'maxAttempts',
  attempts: 'maxAttempts',
};

/** What the graph checks need of a step, read from the raw definition so they run even when its fields have problems. */
interface StepSketch {
  id?: string;
  action?: string;
  dependsOn: string[];
  inputFrom: [key: string, ref: string][];
  /** The keys its own input gives (an object input). */
  inputKeys: string[];
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The steps of a raw definition as far as they can be read ([] when there are none to read). */
export function sketchSteps(value: unknown): StepSketch[] {
  const steps = isRecord(value) && Array.isArray(value.steps) ? value.steps : [];
  return steps.map((step: unknown) => {
    const s = isRecord(step) ? step : {};
    return {
      ...(typeof s.id === 'string' && { id: s.id }),
      ...(typeof s.action === 'string' && { action: s.action }),
      dependsOn: Array.isArray(s.dependsOn) ? s.dependsOn.map((p) => (typeof p === 'string' ? p : '')) : [],
      inputFrom: isRecord(s.inputFrom) ? Object.entries(s.inputFrom).flatMap(([k, ref]) => (typeof ref === 'string' && RESULT_REF.test(ref) ? [[k, ref] as [string, string]] : [])) : [],
      inputKeys: isRecord(s.input) ? Object.keys(s.input) : [],
    };
  });
}

/**
 * Parse and check a definition. `knownActions`, when given, is every action some worker offers.
 * Every problem is listed at once, each with its field path: those of the fields (unknown ones
 * with the name probably meant) and those of the graph (read from whatever steps can be read).
 */
export function checkWorkflow(value: unknown, knownActions?: ReadonlySet<string>): WorkflowCheck {
  const parsed = WorkflowDefinition.safeParse(value);
  const problems: WorkflowProblem[] = parsed.success ? [] : zodProblems(parsed.error, WorkflowDefinition, FIELD_ALIASES);
  // A field already refused is not reported again by the graph checks.
  const refused = new Set(problems.map((p) => p.path));
  for (const p of graphProblems(sketchSteps(value), knownActions)) if (!refused.has(p.path)) problems.push(p);
  return problems.length > 0 || !parsed.success ? { ok: false, problems } : { ok: true, definition: parsed.data };
}

function graphProblems(steps: readonly StepSketch[], knownActions?: ReadonlySet<string>): WorkflowProblem[] {
  const problems: WorkflowProblem[] = [];
  const index = new Map<string, number>();
  steps.forEach((step, i) => {
    if (step.id === undefined) return;
    if (index.has(step.id)) problems.push({ path: `steps.${i}.id`, message: `"${step.id}" is already the id of steps.${index.get(step.id)}` });
    else index.set(step.id, i);
  });
  steps.forEach((step, i) => {
    if (knownActions && step.action !== undefined && !knownActions.has(step.action)) {
      problems.push({ path: `steps.${i}.action`, message: `unknown action "${step.action}"` });
    }
    step.dependsOn.forEach((parent, j) => {
      if (parent === '') return; // not a string: the field check said so
      const first = step.dependsOn.indexOf(parent);
      if (first < j) problems.push({ path: `steps.${i}.dependsOn.${j}`, message: `"${parent}" is already dependsOn.${first}` });
      else if (parent === step.id) problems.push({ path: `steps.${i}.dependsOn.${j}`, message: `step "${step.id}" depends on itself` });
      else if (!index.has(parent)) problems.push({ path: `steps.${i}.dependsOn.${j}`, message: `no step "${parent}" in this workflow` });
    });
    for (const [key, ref] of step.inputFrom) {
      const parent = ref.split('.')[0]!;
      if (!step.dependsOn.includes(parent)) problems.push({ path: `steps.${i}.inputFrom.${key}`, message: `"${ref}" names "${parent}", which is not in dependsOn` });
      // One of the two would silently replace the other.
      else if (step.inputKeys.includes(key)) problems.push({ path: `steps.${i}.inputFrom.${key}`, message: `"${key}" is given in input too; a key is filled from one place` });
    }
  });
  const cycle = findCycle(steps.flatMap((s) => (s.id === undefined ? [] : [{ id: s.id, dependsOn: s.dependsOn }])));
  if (cycle) problems.push({ path: 'steps', message: `dependency cycle: ${cycle.join(' → ')}` });
  return problems;
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

/** An `inputFrom` key whose path its parent's result does not hold. */
export interface MissingResultPath {
  key: string;
  ref: string;
  /** How far the path reached: the ref's prefix that is there (`p.result.out`). */
  found: string;
}

/**
 * A step's input: its own, with `inputFrom` keys filled from its parents' results. A path the
 * result does not hold is not filled with anything: it is in `missing`, and the step cannot run
 * (an explicit `null` in the result is there, and is passed on).
 */
export function stepInput(step: WorkflowStep, results: ReadonlyMap<string, unknown>): { input: unknown; missing: MissingResultPath[] } {
  if (!step.inputFrom) return { input: step.input ?? null, missing: [] };
  const base: Record<string, unknown> = step.input && typeof step.input === 'object' && !Array.isArray(step.input) ? { ...step.input } : {};
  const missing: MissingResultPath[] = [];
  for (const [key, ref] of Object.entries(step.inputFrom)) {
    const [parent, , ...path] = ref.split('.');
    let value: unknown = results.get(parent!) ?? null;
    let reached = 0;
    for (const segment of path) {
      // A list holds its items by index (`rows.0`), not its `length`; an object, its own fields.
      const holds = Array.isArray(value) ? /^(0|[1-9]\d*)$/.test(segment) && Number(segment) < value.length : value !== null && typeof value === 'object' && Object.hasOwn(value, segment);
      if (!holds) break;
      value = (value as Record<string, unknown>)[segment];
      reached++;
    }
    if (reached < path.length) missing.push({ key, ref, found: [parent, 'result', ...path.slice(0, reached)].join('.') });
    else base[key] = value;
  }
  return { input: base, missing };
}
