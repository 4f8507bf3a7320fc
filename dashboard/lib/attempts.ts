// A task's attempts as the task page and the dead-letter view show them.

import type { Attempt, Task } from "./types";

/**
 * The label of a task's `last_error`, or null when it has none. A completed task keeps the error
 * of an earlier attempt (the API does not clear it), so its label says which attempt failed and
 * that the task completed after it.
 */
export function lastErrorLabel(task: Pick<Task, "status" | "last_error" | "attempts">): string | null {
  if (!task.last_error) {
    return null;
  }
  if (task.status !== "completed") {
    return "Last error";
  }
  const failed = task.attempts.filter((a) => a.outcome !== "completed").at(-1);
  return failed ? `Error of attempt ${failed.attempt} (before it completed)` : "Error of an earlier attempt (before it completed)";
}

/** A stable row id for an attempt: attempts of one task differ in time, number or outcome. */
export function attemptKey(a: Attempt, index: number): string {
  return `${index}:${a.attempt}:${a.at}:${a.outcome}`;
}

/** The text of an empty attempts table. */
export function noAttemptsText(task: Pick<Task, "attempt" | "lease">): string {
  if (task.lease) {
    return `Attempt ${task.attempt} is running on ${task.lease.worker}; no attempt has ended yet.`;
  }
  return task.attempt === 0 ? "Not run yet." : "No attempt has ended.";
}
