// Goal: the dashboard opens on the queue where the work is, one that exists and that the key may
// use, and keeps a queue the user chose. Method: chooseQueue over the cases of the selection rule.

import assert from "node:assert/strict";
import { test } from "node:test";
import { busyOf, chooseQueue } from "../../lib/queues";

test("a remembered listed queue is kept, an explicit one always", () => {
  assert.equal(chooseQueue("emails", "remembered", ["emails", "reports"], { reports: 9 }), "emails");
  assert.equal(chooseQueue("reports", "explicit", ["emails", "reports"]), "reports");
});

test("with nothing chosen, the busiest listed queue, not an idle default", () => {
  assert.equal(chooseQueue("default", "none", ["default", "emails", "reports"], { default: 0, emails: 3, reports: 7 }), "reports");
  assert.equal(chooseQueue("default", "none", ["default", "emails"], { default: 2, emails: 2 }), "default", "ties: first by name");
  assert.equal(chooseQueue("default", "none", ["emails", "reports"]), "emails", "no counts: the first");
});

test("an unlisted queue not chosen explicitly gives way to the busiest listed queue", () => {
  assert.equal(chooseQueue("gone", "remembered", ["jobs", "mail"], { mail: 1 }), "mail");
  assert.equal(chooseQueue("gone", "remembered", ["jobs"]), "jobs");
});

test("an explicit choice is kept even when the queue is not listed (yet)", () => {
  assert.equal(chooseQueue("brand-new", "explicit", ["emails"]), "brand-new");
});

test("with no queue listed the selection stays", () => {
  assert.equal(chooseQueue("default", "none", []), "default");
});

test("busy counts the unfinished tasks", () => {
  assert.equal(busyOf({ queued: 1, leased: 2, scheduled: 3, retrying: 4 }), 10);
});
