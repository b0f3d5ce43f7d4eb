// A one-line progress indicator on stderr for long CLI work: rewritten in place on a terminal,
// one line every few seconds otherwise (CI logs), and nothing on stdout, which is for results.
export interface Progress {
  update(done: number): void;
  finish(message: string): void;
}

const BAR_CELLS = 24;

export function progressLine(label: string, total?: number, stream: NodeJS.WriteStream = process.stderr, unit = 'events'): Progress {
  const started = performance.now();
  const tty = stream.isTTY === true;
  // From the start of the work, not of the process: a slow start (a loaded machine) must not draw at once.
  let lastDraw = started;
  const render = (done: number) => {
    const seconds = (performance.now() - started) / 1000;
    const rate = seconds > 0 ? Math.round(done / seconds) : 0;
    const pct = total ? Math.min(100, Math.floor((done / total) * 100)) : 0;
    // On a terminal, a bar too: 24 cells, each ~4%.
    const bar = tty && total && done <= total ? ` [${'█'.repeat(Math.floor(pct / (100 / BAR_CELLS))).padEnd(BAR_CELLS, '░')}]` : '';
    // Past the total counted at the start (a store written to while it is copied): no percentage to give.
    const past = total !== undefined && done > total;
    const share = past
      ? ` ${done.toLocaleString('en')} (more than the ${total.toLocaleString('en')} counted at the start)`
      : total
        ? `${bar} ${pct}% (${done.toLocaleString('en')}/${total.toLocaleString('en')})`
        : ` ${done.toLocaleString('en')}`;
    return `${label}:${share} ${unit}, ${rate.toLocaleString('en')}/s`;
  };
  return {
    update(done) {
      const now = performance.now();
      if (now - lastDraw < (tty ? 100 : 5_000)) return;
      lastDraw = now;
      stream.write(tty ? `\r${render(done)}\u001b[K` : `${render(done)}\n`);
    },
    finish(message) {
      stream.write(`${tty ? '\r\u001b[K' : ''}${label}: ${message}\n`);
    },
  };
}
