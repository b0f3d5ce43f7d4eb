// The lines of an NDJSON file or stdin, numbered from 1, as `baton submit --file` reads them:
// split on the raw bytes, each line decoded as strict UTF-8, so a byte that is not UTF-8 is
// refused, naming its line, instead of becoming U+FFFD in a stored input (what a text stream's
// decoder does silently). A UTF-8 byte order mark before the first line (Excel, PowerShell) is
// dropped, a CR before a line's LF too. A line may not outgrow `maxBytes`, so a file that is no
// NDJSON at all (one huge line) is refused before it fills the memory.
import fs from 'node:fs';
import { BatonError } from '../../errors.ts';
import { InvalidInputError } from '../../input/errors.ts';

const BOM = '\uFEFF';

/** A refusal naming the line, as the batch check names its fields (`line 7: input.ms: …`). */
export const lineProblem = (line: number, message: string) => new InvalidInputError([{ path: `line ${line}`, message }]);

/** The file to read, or a one-line refusal: missing, a directory, unreadable. */
export function openLines(path: string): NodeJS.ReadableStream {
  if (path === '-') return process.stdin;
  let stat: fs.Stats;
  try {
    stat = fs.statSync(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new BatonError(`--file: ${path}: ${code === 'ENOENT' ? 'no such file' : (err as Error).message}`);
  }
  if (stat.isDirectory()) throw new BatonError(`--file: ${path} is a directory; give an NDJSON file (one JSON object per line), or - for stdin`);
  try {
    fs.accessSync(path, fs.constants.R_OK);
  } catch {
    throw new BatonError(`--file: ${path}: cannot read it (permission denied)`);
  }
  return fs.createReadStream(path);
}

/** Each line's text and number (1-based; blank lines included: the caller skips them, numbering stays the file's). */
export async function* ndjsonLines(input: NodeJS.ReadableStream, maxBytes: number): AsyncGenerator<{ number: number; text: string }> {
  const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let number = 0;
  const decode = (bytes: Buffer): string => {
    number++;
    const end = bytes.at(-1) === 13 ? bytes.length - 1 : bytes.length; // CRLF
    let text: string;
    try {
      text = decoder.decode(bytes.subarray(0, end));
    } catch {
      throw lineProblem(number, 'not valid UTF-8 (a byte that is no UTF-8 character, as a Latin-1 é is): save the file as UTF-8');
    }
    return number === 1 && text.startsWith(BOM) ? text.slice(1) : text;
  };
  for await (const chunk of input as AsyncIterable<Buffer | string>) {
    let buf = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
    for (let nl = buf.indexOf(10); nl >= 0; nl = buf.indexOf(10)) {
      const head = buf.subarray(0, nl);
      const line = pending.length === 0 ? head : Buffer.concat([...pending, head]);
      pending = [];
      pendingBytes = 0;
      if (line.length > maxBytes) throw lineProblem(number + 1, `longer than ${maxBytes} bytes`);
      const text = decode(line);
      yield { number, text };
      buf = buf.subarray(nl + 1);
    }
    if (buf.length > 0) {
      pending.push(buf);
      pendingBytes += buf.length;
      if (pendingBytes > maxBytes) throw lineProblem(number + 1, `longer than ${maxBytes} bytes`);
    }
  }
  if (pendingBytes > 0) {
    const text = decode(Buffer.concat(pending)); // the last line, without a newline
    yield { number, text };
  }
}
