"use client";
// Scheduled and retrying tasks of the selected queue: what will run, and when.

import { PagedTasks } from "@/components/PagedTasks";
import { useLive, useQueue } from "@/components/providers";
import { Card, PageTitle } from "@/components/ui";
import { api } from "@/lib/api";
import { formatNumber } from "@/lib/format";
import { useResource } from "@/lib/hooks";

export default function ScheduledPage() {
  const { queue } = useQueue();
  const { tick } = useLive();
  const stats = useResource((signal) => api.queueOrNull(queue, signal), [queue, tick]);
  const n = (s: "scheduled" | "retrying") => (stats.data ? ` (${formatNumber(stats.data.counts[s])})` : "");
  return (
    <>
      <PageTitle sub={`Tasks of ${queue} waiting for their run time: delayed submits, and failed attempts waiting out their backoff.`}>
        Scheduled &amp; retrying
      </PageTitle>
      <Card title={`Scheduled${n("scheduled")}`} testid="card-scheduled">
        <PagedTasks queue={queue} status="scheduled" empty="No scheduled task: nothing was submitted with a delay or a run time." />
      </Card>
      <Card title={`Retrying${n("retrying")}`} testid="card-retrying">
        <PagedTasks queue={queue} status="retrying" empty="No task is waiting to retry." />
      </Card>
    </>
  );
}
