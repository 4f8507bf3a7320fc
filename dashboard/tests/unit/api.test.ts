// Goal: the Replay view tells "this orq keeps no timelines" from a real failure. Method:
// timelinesOff over the answers GET /timelines can give.

import assert from "node:assert/strict";
import { test } from "node:test";
import { ApiError, timelinesOff } from "../../lib/api";

test("a 404 of the timelines list means timelines are off; other failures do not", () => {
  assert.equal(timelinesOff(new ApiError(404, "not_found", "timelines are not enabled: start orq with --timelines DIR")), true);
  assert.equal(timelinesOff(new ApiError(404, "http_404", "Not Found")), true, "a proxy's 404");
  assert.equal(timelinesOff(new ApiError(405, "method_not_allowed", "method not allowed")), true);
  assert.equal(timelinesOff(new ApiError(503, "store_unavailable", "Redis is loading")), false);
  assert.equal(timelinesOff(new ApiError(403, "forbidden", "needs an admin key", true)), false);
  assert.equal(timelinesOff(new ApiError(0, "unreachable", "orq is not reachable")), false);
  assert.equal(timelinesOff(new Error("boom")), false);
});
