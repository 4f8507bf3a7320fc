// Which queue the views show. Pure (tested).

/** How the current selection came about. */
export type Selected =
  /** The user chose it in this tab (the picker, `?queue=`). */
  | "explicit"
  /** Remembered from an earlier visit. */
  | "remembered"
  /** Nothing chosen yet (the built-in `default`). */
  | "none";

/**
 * The queue to show, given the one selected now, how it was selected, the queues `GET /queues`
 * lists (for a tenant key: only the queues it may use) and how busy each is (`busy`: tasks
 * queued, leased, scheduled or retrying). An explicit choice is kept: it may name a queue that
 * receives its first task next. A remembered choice is kept while the queue is listed. Otherwise
 * the dashboard opens on the busiest listed queue (ties: the first by name), so that it does not
 * open on an idle `default`, a queue that does not exist, or one the key may not use.
 */
export function chooseQueue(
  current: string,
  selected: Selected,
  listed: readonly string[],
  busy: Readonly<Record<string, number>> = {},
): string {
  if (selected === "explicit" || listed.length === 0) {
    return current;
  }
  if (selected === "remembered" && listed.includes(current)) {
    return current;
  }
  let best = listed[0]!;
  for (const q of listed) {
    if ((busy[q] ?? 0) > (busy[best] ?? 0)) best = q;
  }
  return best;
}

/** Tasks of a queue's counts that are not finished: what "busy" means for {@link chooseQueue}. */
export function busyOf(counts: { queued: number; leased: number; scheduled: number; retrying: number }): number {
  return counts.queued + counts.leased + counts.scheduled + counts.retrying;
}
