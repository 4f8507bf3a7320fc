// Goal: the dashboard opens on a queue that exists and that the key may use, and keeps a queue the
// user chose. Method: chooseQueue over the cases of the selection rule.

import assert from "node:assert/strict";
import { test } from "node:test";
import { chooseQueue } from "../../lib/queues";

test("a listed queue is kept", () => {
  assert.equal(chooseQueue("emails", false, ["emails", "reports"]), "emails");
  assert.equal(chooseQueue("reports", true, ["emails", "reports"]), "reports");
});

test("an unlisted queue not chosen explicitly gives way to the first listed queue", () => {
  assert.equal(chooseQueue("default", false, ["emails", "reports"]), "emails");
  assert.equal(chooseQueue("gone", false, ["jobs"]), "jobs");
});

test("an explicit choice is kept even when the queue is not listed (yet)", () => {
  assert.equal(chooseQueue("brand-new", true, ["emails"]), "brand-new");
});

test("with no queue listed the selection stays", () => {
  assert.equal(chooseQueue("default", false, []), "default");
});
