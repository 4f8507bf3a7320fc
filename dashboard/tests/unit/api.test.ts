// Goal: the Replay view tells "this orq keeps no timelines" from a real failure, and knows how long
// a 503 asks it to wait. Method: timelinesOff over the answers GET /timelines can give;
// parseRetryAfter over both forms of the header and values that are neither.

import assert from "node:assert/strict";
import { test } from "node:test";
import { ApiError, parseRetryAfter, timelinesOff } from "../../lib/api";

test("a 404 of the timelines list means timelines are off; other failures do not", () => {
  assert.equal(timelinesOff(new ApiError(404, "not_found", "timelines are not enabled: start orq with --timelines DIR")), true);
  assert.equal(timelinesOff(new ApiError(404, "http_404", "Not Found")), true, "a proxy's 404");
  assert.equal(timelinesOff(new ApiError(405, "method_not_allowed", "method not allowed")), true);
  assert.equal(timelinesOff(new ApiError(503, "store_unavailable", "Redis is loading")), false);
  assert.equal(timelinesOff(new ApiError(403, "forbidden", "needs an admin key", true)), false);
  assert.equal(timelinesOff(new ApiError(0, "unreachable", "orq is not reachable")), false);
  assert.equal(timelinesOff(new Error("boom")), false);
});

test("Retry-After is read as seconds or as an HTTP date; anything else is no advice", () => {
  const now = Date.parse("2026-01-02T03:04:05Z");
  assert.equal(parseRetryAfter("30", now), 30);
  assert.equal(parseRetryAfter(" 0 ", now), 0);
  assert.equal(parseRetryAfter("Fri, 02 Jan 2026 03:05:05 GMT", now), 60);
  assert.equal(parseRetryAfter("Fri, 02 Jan 2026 03:04:04 GMT", now), 0, "a date in the past: now");
  for (const bad of [null, "", "-5", "1.5", "soon", "1e3", "99999999999999999999"]) {
    assert.equal(parseRetryAfter(bad, now), null, String(bad));
  }
});
