/**
 * @orq/client: the TypeScript client of orq. {@link Client} submits, reads, lists, cancels and
 * replays tasks and speaks the worker protocol; {@link Worker} runs handlers for leased tasks.
 * Failures are typed ({@link OrqError} and its subclasses).
 */
export { Client, type ClientOptions, type FailOptions, type LeaseRequest } from "./client.js";
export { Worker, type WorkerOptions } from "./worker.js";
export { Permanent, type AbortReason, type Handler, type Job } from "./job.js";
export { stderrLogger, type LogFields, type Logger } from "./logger.js";
export {
  BadRequest,
  Conflict,
  ConnectionFailed,
  ERROR_CLASSES,
  Forbidden,
  LeaseLost,
  NotFound,
  OrqError,
  PayloadTooLarge,
  RateLimited,
  ServerError,
  TaskCancelled,
  Unauthorized,
  Unavailable,
  Unprocessable,
  errorFromAnswer,
  parseRetryAfter,
  type ClientErrorCode,
  type OrqErrorClass,
  type OrqErrorInit,
} from "./errors.js";
export type * from "./types.js";
