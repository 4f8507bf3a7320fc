/**
 * The worker's logger: four levels, a message and structured fields (always the task id when
 * there is a task). The default writes one line per entry to stderr.
 */

/** Fields of a log entry, e.g. `{ task: "01J...", queue: "emails" }`. */
export type LogFields = Record<string, unknown>;

/** Where the worker logs; any object with these four methods (console-like loggers fit). */
export interface Logger {
  /** Routine detail (each lease, each report). */
  debug(message: string, fields?: LogFields): void;
  /** Lifecycle: start, stop. */
  info(message: string, fields?: LogFields): void;
  /** Something went wrong that the worker handles (a retry, a dropped task). */
  warn(message: string, fields?: LogFields): void;
  /** Something went wrong that needs a person (a report given up, a fatal lease error). */
  error(message: string, fields?: LogFields): void;
}

/** Render a field's value on one line. */
function show(value: unknown): string {
  if (value instanceof Error) return JSON.stringify(`${value.name}: ${value.message}`);
  if (typeof value === "string") return /^[\w.:/-]*$/.test(value) ? value : JSON.stringify(value);
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/**
 * A logger writing `orq-worker LEVEL message k=v ...` lines to stderr; `debug` lines only when
 * `debug` is true.
 */
export function stderrLogger(debug = false): Logger {
  const line = (level: string, message: string, fields?: LogFields) => {
    const rest = Object.entries(fields ?? {})
      .map(([k, v]) => `${k}=${show(v)}`)
      .join(" ");
    process.stderr.write(`orq-worker ${level} ${message}${rest ? " " + rest : ""}\n`);
  };
  return {
    debug: (m, f) => {
      if (debug) line("DEBUG", m, f);
    },
    info: (m, f) => line("INFO", m, f),
    warn: (m, f) => line("WARN", m, f),
    error: (m, f) => line("ERROR", m, f),
  };
}
