// The transactions this store instance committed for one appender (AppendOrigin), so that a
// `stream` subscription fed by that appender (`appliedBy`) reads past their rows instead of reading
// back, with their data, events the appender has applied itself (migrations/0007_…sql says what that
// cost). Only a transaction all of whose rows came from one appender is kept (a group commit of one
// origin, or a lone append); a mixed one and any whose answer was lost are read back as before.
// Lone appends were read back until 2026-11-29: at light load that was a read of the store per
// execution (the executor's follower read back each outcome its worker appended), 409 against 208
// reads in 200 pickups at 50/s.
//
// Never needed for correctness: an xid forgotten (past KEPT, or passed over by `of`) or not yet
// known only means its rows are read and found applied. The appender applies its events once its
// append's answer arrives, in the same turn as the xid is noted or after; a scan that passes over
// its rows in between is no different from one that reads them before the answer arrives
// (recordOwn in actor-runtime.ts).
import type { AppendOrigin } from './event-store.ts';

/** Transactions remembered: far more than commit between two reads of a busy follower (~50 here). */
const KEPT = 4_096;
/**
 * `of` walks back from the newest and stops after this many in a row that no scan from the cursor
 * can meet. Answers arrive a little out of order (several transactions in flight), never by this
 * many; the walk then costs what was committed since the last read, not all KEPT, on every read.
 */
const BELOW_IN_A_ROW = 32;

export class OwnCommits {
  #xids: bigint[] = [];
  #origins: AppendOrigin[] = [];

  /** A transaction `origin` alone wrote (its xid as text); nothing when it wrote nothing or names no appender. */
  add(xid: string | null, origin: AppendOrigin | undefined): void {
    if (xid === null || origin === undefined) return;
    this.#xids.push(BigInt(xid));
    this.#origins.push(origin);
    if (this.#xids.length > 2 * KEPT) {
      this.#xids = this.#xids.slice(-KEPT);
      this.#origins = this.#origins.slice(-KEPT);
    }
  }

  /** The remembered transactions of appenders in `by` that a scan after `cursorXid`, or of `pending`, may meet. */
  of(by: ReadonlySet<AppendOrigin> | undefined, cursorXid: string, pending: readonly string[]): string[] {
    if (!by || by.size === 0 || this.#xids.length === 0) return [];
    const after = BigInt(cursorXid);
    const open = new Set(pending.map(BigInt));
    let floor = after;
    for (const x of open) if (x < floor) floor = x;
    const out: string[] = [];
    for (let i = this.#xids.length - 1, below = 0; i >= 0 && below < BELOW_IN_A_ROW; i--) {
      const xid = this.#xids[i]!;
      below = xid < floor ? below + 1 : 0;
      if (by.has(this.#origins[i]!) && (xid > after || open.has(xid))) out.push(xid.toString());
    }
    return out;
  }
}
