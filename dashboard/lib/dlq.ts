// Counting the dead tasks a bulk replay would take, so its confirmation can state the number.

import { api } from "./api";

/** Most listing pages read to count dead tasks matching a filter. */
export const COUNT_PAGES_MAX = 20;
/** Page size of that count. */
export const COUNT_PAGE_SIZE = 1000;
/** Most tasks one bulk replay call takes (orq's REPLAY_LIMIT_MAX). */
export const REPLAY_LIMIT_MAX = 10_000;

export interface DeadCount {
  count: number;
  /** False when the count stopped at COUNT_PAGES_MAX pages: there are at least `count`. */
  exact: boolean;
}

/**
 * Dead tasks of `queue` matching the filter: the queue's counter when there is no filter,
 * otherwise by paging through the DLQ listing with the same filter the replay will use.
 */
export async function countDead(queue: string, tenant?: string, type?: string, signal?: AbortSignal): Promise<DeadCount> {
  if (!tenant && !type) {
    const st = await api.queueOrNull(queue, signal);
    return { count: st?.counts.dead ?? 0, exact: true };
  }
  let count = 0;
  let cursor: string | null = null;
  for (let i = 0; i < COUNT_PAGES_MAX; i++) {
    const page = await api.dlq({ queue, tenant, type, cursor, limit: COUNT_PAGE_SIZE }, signal);
    count += page.tasks.length;
    cursor = page.next_cursor ?? null;
    if (cursor === null) {
      return { count, exact: true };
    }
  }
  return { count, exact: false };
}
