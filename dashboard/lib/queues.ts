// Which queue the views show. Pure (tested).

/**
 * The queue to show, given the one selected now, whether the user chose it explicitly in this tab
 * (the picker, `?queue=`), and the queues `GET /queues` lists (for a tenant key: only the queues it
 * may use). A queue that is not listed and was not chosen explicitly (the built-in `default`, or a
 * choice remembered from an earlier visit) gives way to the first listed queue, so the dashboard
 * does not open on a queue that does not exist or that the key may not use. An explicit choice is
 * kept: it may name a queue that receives its first task next.
 */
export function chooseQueue(current: string, explicit: boolean, listed: readonly string[]): string {
  if (explicit || listed.length === 0 || listed.includes(current)) {
    return current;
  }
  return listed[0]!;
}
