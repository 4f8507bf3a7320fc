"use client";
// The actions on one task, each behind a confirmation: cancel (while it can still run), replay
// and purge (while dead).

import { useState } from "react";
import { api, errorMessage, NEEDS_ADMIN } from "@/lib/api";
import type { Task } from "@/lib/types";
import { ConfirmDialog } from "./Dialog";
import { useAdminDenied, useToast } from "./providers";

type Action = "cancel" | "replay" | "purge";

const CANCELLABLE = new Set(["scheduled", "queued", "retrying", "leased"]);

export function TaskActions({
  task,
  onDone,
  compact,
}: {
  task: Task;
  onDone: (action: Action, task: Task | null) => void;
  compact?: boolean;
}) {
  const toast = useToast();
  const denied = useAdminDenied();
  const [asking, setAsking] = useState<Action | null>(null);
  const [busy, setBusy] = useState(false);
  const run = async (a: Action) => {
    setBusy(true);
    try {
      if (a === "cancel") {
        const t = await api.cancel(task.id, task.queue);
        toast("ok", `Cancelled ${task.id}`);
        onDone(a, t);
      } else if (a === "replay") {
        const t = await api.replay(task.id, task.queue);
        toast("ok", `Replayed ${task.id}: ${t.status}`);
        onDone(a, t);
      } else {
        await api.purge(task.id, task.queue);
        toast("ok", `Purged ${task.id}`);
        onDone(a, null);
      }
    } catch (e) {
      toast("error", `${a} failed: ${errorMessage(e)}`);
    } finally {
      setBusy(false);
      setAsking(null);
    }
  };
  const cls = compact ? "small" : undefined;
  return (
    <>
      {CANCELLABLE.has(task.status) && (
        <button type="button" className={cls} onClick={() => setAsking("cancel")} data-testid={`cancel-${task.id}`}>
          Cancel
        </button>
      )}
      {task.status === "dead" && (
        <>
          <button type="button" className={`primary ${cls ?? ""}`} onClick={() => setAsking("replay")} data-testid={`replay-${task.id}`}>
            Replay
          </button>
          <button
            type="button"
            className={`danger ${cls ?? ""}`}
            onClick={() => setAsking("purge")}
            data-testid={`purge-${task.id}`}
            disabled={denied}
            title={denied ? `Purging ${NEEDS_ADMIN}` : undefined}
          >
            Purge
          </button>
        </>
      )}
      {asking && (
        <ConfirmDialog
          title={
            asking === "cancel" ? "Cancel this task?" : asking === "replay" ? "Replay this dead task?" : "Purge this dead task?"
          }
          confirmLabel={asking === "cancel" ? "Cancel task" : asking === "replay" ? "Replay" : "Purge for good"}
          danger={asking !== "replay"}
          busy={busy}
          onConfirm={() => void run(asking)}
          onCancel={() => setAsking(null)}
        >
          <p className="mono">{task.id}</p>
          <p>
            {task.type} task of tenant <b>{task.tenant}</b> in queue <b>{task.queue}</b>, attempt {task.attempt}.
          </p>
          {asking === "cancel" && task.status === "leased" && (
            <p>It is running: its handler is stopped at its next heartbeat.</p>
          )}
          {asking === "replay" && <p>It is queued again with a fresh retry budget; its history is kept.</p>}
          {asking === "purge" && <p>Its record is deleted. This cannot be undone.</p>}
        </ConfirmDialog>
      )}
    </>
  );
}
