/**
 * Completions sent together: running tasks hand their results to one completer, which sends
 * the ones waiting in one `POST /api/v1/leases/complete` (up to 100, and {@link BATCH_BYTES_MAX}
 * of results), so a busy worker makes one request for several tasks instead of one each. Nothing
 * lingers beyond the current turn of the event loop: a completion waits only while the previous
 * call is out. What a batch does not settle (its call refused, or the item refused) goes back to
 * the task, which sends it alone with the usual retries.
 */
import type { Client } from "./client.js";
import type { Logger } from "./logger.js";

/** Most completions in one call (the API's limit). */
const BATCH_MAX = 100;
/** Most bytes of results in one call (the API takes 4 MiB of body in all). */
const BATCH_BYTES_MAX = 3 * 1024 * 1024;
/** Results larger than this (bytes) are sent alone. */
const ALONE_BYTES = 256 * 1024;

interface Waiting {
  queue: string;
  id: string;
  token: string;
  result: unknown;
  bytes: number;
  settle: (reported: string | undefined) => void;
}

/** Sends the completions of one worker together. */
export class Completer {
  private waiting: Waiting[] = [];
  private pumping = false;

  constructor(
    private readonly client: Client,
    private readonly logger: Logger,
  ) {}

  /**
   * Complete with the others waiting: resolves `"applied"` / `"already_applied"`, or undefined
   * when the batch did not apply it (the caller then sends it alone and learns why). `bytes`:
   * the result's size as JSON.
   */
  complete(queue: string, id: string, token: string, result: unknown, bytes: number): Promise<string | undefined> {
    if (bytes > ALONE_BYTES) return Promise.resolve(undefined);
    return new Promise((settle) => {
      this.waiting.push({ queue, id, token, result, bytes, settle });
      if (!this.pumping) {
        this.pumping = true;
        // Completions of the same turn of the event loop go in one call.
        setImmediate(() => void this.pump());
      }
    });
  }

  private async pump(): Promise<void> {
    try {
      while (this.waiting.length > 0) {
        const queue = this.waiting[0]!.queue;
        const batch: Waiting[] = [];
        const rest: Waiting[] = [];
        let bytes = 0;
        for (const w of this.waiting) {
          if (w.queue === queue && batch.length < BATCH_MAX && (batch.length === 0 || bytes + w.bytes <= BATCH_BYTES_MAX)) {
            batch.push(w);
            bytes += w.bytes;
          } else {
            rest.push(w);
          }
        }
        this.waiting = rest;
        await this.send(queue, batch);
      }
    } finally {
      this.pumping = false;
    }
  }

  private async send(queue: string, batch: Waiting[]): Promise<void> {
    let answers: (string | undefined)[];
    try {
      const got = await this.client.completeMany(queue, batch, { retries: 0 });
      answers = got.length === batch.length ? got.map((r) => (typeof r === "string" ? r : undefined)) : batch.map(() => undefined);
    } catch (err) {
      this.logger.debug(`a batch of ${batch.length} completions was refused; each is sent alone`, { queue, error: err });
      answers = batch.map(() => undefined);
    }
    batch.forEach((w, i) => w.settle(answers[i]));
  }
}
