// Goal: the task page labels a completed task's leftover error with the attempt it came from, and
// says why an attempts table is empty. Method: the helpers over each status that matters.

import assert from "node:assert/strict";
import { test } from "node:test";
import { attemptKey, lastErrorLabel, noAttemptsText } from "../../lib/attempts";
import type { Attempt } from "../../lib/types";

const failed: Attempt = { attempt: 2, at: "2026-12-04T10:00:00.000Z", worker: "w-1", outcome: "failed", error: "smtp down" };
const done: Attempt = { attempt: 3, at: "2026-12-04T10:00:05.000Z", worker: "w-2", outcome: "completed", error: null };

test("a completed task's error is labelled with the attempt it came from", () => {
  assert.equal(lastErrorLabel({ status: "completed", last_error: "smtp down", attempts: [failed, done] }), "Error of attempt 2 (before it completed)");
  assert.equal(lastErrorLabel({ status: "completed", last_error: "old", attempts: [done] }), "Error of an earlier attempt (before it completed)");
  assert.equal(lastErrorLabel({ status: "retrying", last_error: "smtp down", attempts: [failed] }), "Last error");
  assert.equal(lastErrorLabel({ status: "completed", last_error: null, attempts: [done] }), null);
});

test("an empty attempts table says whether the task runs or never ran", () => {
  assert.equal(noAttemptsText({ attempt: 0, lease: null }), "Not run yet.");
  assert.equal(
    noAttemptsText({ attempt: 1, lease: { worker: "w-9", expires_at: "2026-12-04T10:00:00.000Z", epoch: 1 } }),
    "Attempt 1 is running on w-9; no attempt has ended yet.",
  );
});

test("attempt keys differ between attempts of one task", () => {
  assert.notEqual(attemptKey(failed, 0), attemptKey(done, 1));
  assert.notEqual(attemptKey(failed, 0), attemptKey(failed, 1));
});
