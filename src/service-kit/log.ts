// The services' log (the gateway, a capture server, a replay server): one JSON line per event on stdout,
// `{"event": ..., "time": ISO, ...}`.

export type LogFields = Record<string, unknown>;
export type Logger = (event: string, fields?: LogFields) => void;

export const logJsonLine: Logger = (event, fields = {}) => {
  process.stdout.write(JSON.stringify({ event, time: new Date().toISOString(), ...fields }) + "\n");
};
