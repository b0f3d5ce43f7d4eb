// Where the CPU of a benchmark phase went, per execution: this process (the submitting client,
// the executor and the workers), the projector's process, and everything else on the machine
// (Postgres, NATS, and whatever else runs there) from the kernel's totals. Linux only (/proc);
// elsewhere the split is left out rather than guessed.
import { readFileSync } from 'node:fs';

const TICK_US = 10_000; // USER_HZ is 100 on every Linux Node supports

export interface CpuSplit {
  /** Microseconds of CPU per execution. */
  thisProcessUs: number;
  projectorUs: number | undefined;
  restUs: number;
  totalUs: number;
}

function machineBusyTicks(): number | undefined {
  try {
    const [, ...fields] = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/);
    const [user, nice, system, , , irq, softirq, steal] = fields.map(Number);
    return user! + nice! + system! + irq! + softirq! + (steal ?? 0);
  } catch {
    return undefined;
  }
}

function processTicks(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces: count fields after its closing parenthesis.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15)
  } catch {
    return undefined;
  }
}

/** Start counting; `stop(executions)` gives the split per execution, or undefined off Linux. */
export function startCpuAccounting(projectorPid?: number): { stop(executions: number): CpuSplit | undefined } {
  const machine0 = machineBusyTicks();
  const self0 = process.cpuUsage();
  const projector0 = projectorPid === undefined ? undefined : processTicks(projectorPid);
  return {
    stop(executions) {
      const machine1 = machineBusyTicks();
      if (machine0 === undefined || machine1 === undefined || executions <= 0) return undefined;
      const self = process.cpuUsage(self0);
      const thisProcessUs = self.user + self.system;
      const projector1 = projectorPid === undefined ? undefined : processTicks(projectorPid);
      const projectorUs = projector0 === undefined || projector1 === undefined ? undefined : (projector1 - projector0) * TICK_US;
      const totalUs = (machine1 - machine0) * TICK_US;
      const per = (us: number) => Math.round(us / executions);
      return {
        thisProcessUs: per(thisProcessUs),
        projectorUs: projectorUs === undefined ? undefined : per(projectorUs),
        restUs: per(Math.max(0, totalUs - thisProcessUs - (projectorUs ?? 0))),
        totalUs: per(totalUs),
      };
    },
  };
}
