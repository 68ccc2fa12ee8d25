/**
 * How often prom-client's default metrics (in the worker's and the API's registries) sample the event
 * loop's delay; prom-client's own default is 10 ms. Each sample is a timer that wakes the process:
 * 100 times a second at 10 ms, which was half the CPU of an idle worker. Each delay is still measured
 * to the nanosecond; only how many are sampled changes.
 */
export const EVENT_LOOP_SAMPLE_MS = 100
