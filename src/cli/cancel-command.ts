// `baton cancel <id>`: cancel an execution in whatever state it is in (src/runtime/cancel.ts),
// and say what happened: cancelled now, asked its worker to stop, already asked, or too late.
import type { Command } from 'commander';
import { statusOf } from '../../actors/execution.machine.ts';
import { cancelExecution } from '../runtime/cancel.ts';
import { executionId } from './arguments.ts';
import { withContext } from './context.ts';
import { toJson } from './format.ts';
import { waitForFinal } from './wait.ts';

const DEFAULT_REASON = 'cancelled from the command line';

export function registerCancelCommand(program: Command): void {
  program
    .command('cancel')
    .description('cancel an execution: at once before a worker holds it, else by asking that worker to stop (exit 1 when too late)')
    .argument('<id>', 'execution id', executionId)
    .option('--reason <text>', 'why (recorded in the history)', DEFAULT_REASON)
    .option('--wait', 'wait until it reaches a final state and print it (exit 1 unless Cancelled)')
    .option('--timeout <ms>', 'with --wait: give up after this long (exit 2)', (v) => Number(v))
    .option('--json', 'print JSON')
    .action(async (id: string, o: { reason: string; wait?: boolean; timeout?: number; json?: boolean }) => {
      await withContext(async ({ runtime, store }) => {
        const r = await cancelExecution(runtime, id, o.reason);
        if (r.outcome === 'too-late') {
          if (o.json) console.log(toJson(r));
          else process.stderr.write(`baton: ${r.message}\n`);
          process.exitCode = 1;
          return;
        }
        if (!o.wait) {
          console.log(o.json ? toJson(r) : r.message);
          return;
        }
        if (!o.json) process.stderr.write(`${r.message}\nwaiting for it to end …\n`);
        const done = await waitForFinal(store, runtime, id, o.timeout);
        if (!done) {
          process.stderr.write(`baton: execution ${id} did not end within ${o.timeout} ms\n`);
          process.exitCode = 2;
          return;
        }
        const status = statusOf(done.snapshot);
        const by = done.events.at(-1)?.metadata.by;
        if (o.json) console.log(toJson({ ...r, status, endedBy: by }));
        else console.log(`${status}${status === 'Cancelled' ? ` (recorded by ${String(by)})` : ' (it finished before the cancel reached it)'}`);
        if (status !== 'Cancelled') process.exitCode = 1;
      });
    });
}
