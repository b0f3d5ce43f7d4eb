// Replay of a schedule's history: every stored event decided again by this build's schedule
// machine, from the first, and the state it reaches compared with the state recorded when the
// event was appended (metadata.stateAfter). A divergence names the event: one the machine now
// refuses, or one that leads elsewhere than it did. Pure; `baton schedule replay` and the
// tests read the stream and call it.
import { decideSchedule, startSchedule, type ScheduleSnapshot } from '../../actors/schedule.machine.ts';
import type { ScheduleEvent } from '../../schemas/schedule-events.ts';

export interface ScheduleDivergence {
  revision: number;
  type: string;
  recorded: string | undefined;
  /** The state this build reaches, or why it refuses the event. */
  replayed: string;
}

export interface ScheduleReplay {
  events: number;
  divergences: ScheduleDivergence[];
  /** The state the replay ended in (where it stopped, after a refusal). */
  finalState: string | undefined;
}

export function replaySchedule(events: readonly ScheduleEvent[]): ScheduleReplay {
  const divergences: ScheduleDivergence[] = [];
  let snapshot: ScheduleSnapshot | undefined;
  for (const [i, e] of events.entries()) {
    let replayed: string;
    if (snapshot === undefined) {
      if (e.type !== 'ScheduleCreated') {
        divergences.push({ revision: i, type: e.type, recorded: e.metadata.stateAfter, replayed: 'refused: a schedule starts with ScheduleCreated' });
        break;
      }
      snapshot = startSchedule(e);
      replayed = String(snapshot.value);
    } else {
      const d = decideSchedule(snapshot, e);
      if (!d.ok) {
        divergences.push({ revision: i, type: e.type, recorded: e.metadata.stateAfter, replayed: `refused: ${d.reason}` });
        break;
      }
      snapshot = d.snapshot;
      replayed = String(snapshot.value);
    }
    if (e.metadata.stateAfter !== undefined && e.metadata.stateAfter !== replayed) divergences.push({ revision: i, type: e.type, recorded: e.metadata.stateAfter, replayed });
  }
  return { events: events.length, divergences, finalState: snapshot && String(snapshot.value) };
}
