// Reading a workflow definition file: JSON (`.json`) or YAML (anything else; YAML 1.2 reads JSON
// too). A syntax error names the file, line and column; what the definition means is checked
// afterwards by checkWorkflow, which names field paths.
import fs from 'node:fs/promises';
import { parseDocument, type YAMLError } from 'yaml';
import { BatonError } from '../errors.ts';

/** The file could not be read or parsed; the message names where. */
export class DefinitionFileError extends BatonError {
  constructor(readonly file: string, readonly line: number | undefined, readonly column: number | undefined, reason: string, options?: ErrorOptions) {
    super(`${file}${line !== undefined ? `:${line}:${column ?? 1}` : ''}: ${reason}`, options);
  }
}

/** 1-based line and column of a character offset. */
function lineColumn(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  return { line, column: offset - before.lastIndexOf('\n') };
}

export function parseDefinitionText(text: string, file: string): unknown {
  if (file.toLowerCase().endsWith('.json')) {
    try {
      return JSON.parse(text);
    } catch (err) {
      const message = (err as Error).message;
      // V8 says "… in JSON at position 42" (and on newer versions "(line 3 column 5)").
      const position = /at position (\d+)/.exec(message);
      const at = position ? lineColumn(text, Number(position[1])) : undefined;
      const reason = message.replace(/\s*(in JSON )?at position \d+.*$/, '').replace(/\s*\(line \d+ column \d+\)/, '');
      throw new DefinitionFileError(file, at?.line, at?.column, `invalid JSON: ${reason}`, { cause: err });
    }
  }
  // Warnings too (an unknown tag such as !!js/function, read as plain text otherwise): a
  // definition is refused for what it does not mean, not printed a warning about and run.
  const doc = parseDocument(text, { prettyErrors: true });
  const [problem] = [...doc.errors, ...doc.warnings];
  if (problem) throw yamlError(file, problem);
  try {
    return doc.toJS();
  } catch (err) {
    // An alias bomb (aliases of aliases, each expanding the last): the yaml package stops it.
    throw new DefinitionFileError(file, undefined, undefined, `invalid YAML: ${(err as Error).message}`, { cause: err });
  }
}

function yamlError(file: string, err: YAMLError): DefinitionFileError {
  const [start] = err.linePos ?? [];
  // The message ends with the position and an excerpt; keep the first line's reason.
  const reason = err.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '');
  return new DefinitionFileError(file, start?.line, start?.col, `invalid YAML: ${reason}`, { cause: err });
}

export async function readDefinitionFile(file: string): Promise<unknown> {
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (err) {
    throw new DefinitionFileError(file, undefined, undefined, `cannot read it (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`, { cause: err });
  }
  return parseDefinitionText(text, file);
}
