// What `baton bench [eventstore | projections | replay]` do (their options are defined in main.ts).
import { runEndToEndBench, printEndToEndBench } from '../../bench/end-to-end.ts';
import { runEventStoreBench, printEventStoreBench } from '../../bench/eventstore.ts';
import { runProjectionBench, printProjectionBench } from '../../bench/projections.ts';
import { runReplayBench, printReplayBench } from '../../bench/replay.ts';
import { runSubmitBench, printSubmitBench } from '../../bench/submit.ts';
import { runRetentionBench, printRetentionBench } from '../../bench/retention.ts';
import { runStartBench, printStartBench } from '../../bench/start.ts';
import { asDeployed } from '../../bench/deployed-node.ts';
import { withContext, type CliContext } from '../context.ts';
import { toJson } from '../format.ts';

const progress = (line: string) => process.stderr.write(`${line}\n`);
/** Every benchmark runs in Node as deployed (deployed-node.ts), on the configured database. */
const benchmark = (run: (ctx: CliContext) => Promise<void>) => asDeployed(() => withContext(run));

export async function endToEndBenchCommand(o: { executions: number; concurrency: number; workers: number; latencySamples: number; latencyInterval: number; history: number; inputBytes: number; transport: 'nats' | 'postgres'; projector: 'process' | 'in-process'; eagerDispatch?: 'on' | 'off'; json?: boolean }): Promise<void> {
  await benchmark(async (ctx) => {
    const eagerDispatch = o.eagerDispatch === undefined ? ctx.config.eagerDispatch : o.eagerDispatch === 'on';
    const result = await runEndToEndBench(ctx, { ...o, eagerDispatch, natsUrl: ctx.config.natsUrl, progress });
    console.log(o.json ? toJson(result) : printEndToEndBench(result));
  });
}

export async function eventStoreBenchCommand(o: { seconds: number; largeHistory: number; streams: number; json?: boolean }): Promise<void> {
  await benchmark(async (ctx) => {
    const result = await runEventStoreBench(ctx, { seconds: o.seconds, largeHistory: o.largeHistory, streams: o.streams, progress });
    console.log(o.json ? toJson(result) : printEventStoreBench(result));
  });
}

export async function projectionBenchCommand(o: { executions: number; liveSeconds: number; liveRate: number; json?: boolean }): Promise<void> {
  await benchmark(async (ctx) => {
    const result = await runProjectionBench(ctx, { ...o, progress });
    console.log(o.json ? toJson(result) : printProjectionBench(result));
  });
}

export async function replayBenchCommand(o: { executions: number; json?: boolean }): Promise<void> {
  await benchmark(async (ctx) => {
    const result = await runReplayBench(ctx, { ...o, progress });
    console.log(o.json ? toJson(result) : printReplayBench(result));
  });
}

export async function submitBenchCommand(o: { seconds: number; inFlight: number; batchSize: number; json?: boolean }): Promise<void> {
  await benchmark(async (ctx) => {
    const result = await runSubmitBench(ctx, { ...o, progress });
    console.log(o.json ? toJson(result) : printSubmitBench(result));
  });
}

export async function retentionBenchCommand(o: { executions: number; json?: boolean }): Promise<void> {
  await benchmark(async (ctx) => {
    const result = await runRetentionBench(ctx, { ...o, progress });
    console.log(o.json ? toJson(result) : printRetentionBench(result));
  });
}

export async function startBenchCommand(o: { finished: number; live: number; verbose?: boolean; json?: boolean }): Promise<void> {
  await benchmark(async (ctx) => {
    const result = await runStartBench(ctx, { ...o, progress });
    console.log(o.json ? toJson(result) : printStartBench(result));
  });
}
