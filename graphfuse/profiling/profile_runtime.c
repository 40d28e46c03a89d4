/* graphfuse's profiling runtime: the timers an instrumented entry function calls around
 * each kernel call (instrument.py inserts the calls), and the compiled FMA loop that
 * measures this machine's peak f32 FLOP rate (machine.py).
 *
 * Timers: CLOCK_MONOTONIC through the vDSO (no system call, tens of nanoseconds), read on
 * the thread that calls the entry; a kernel's parallel loops run inside the call, so a
 * kernel's time includes its fork and its closing barrier. Per call site the runtime keeps
 * a total and a count, and, while events are enabled, appends one event per call (and per
 * whole run) to a buffer of fixed size set up front: when it is full further events are
 * counted as dropped, never allocated during a run. One profile at a time per process:
 * the counters are global and not locked (the profiler calls the entry from one thread).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GF_EXPORT __attribute__((visibility("default")))

typedef struct {
  int32_t site; /* the call site, or -1 for a whole run */
  int32_t run;
  int64_t start_ns;
  int64_t duration_ns;
} gf_event;

static int32_t sites;
static int ready; /* set up: runs are counted (a function may call no kernel) */
static int64_t *totals, *counts, *opened;
static gf_event *events;
static int64_t capacity, recorded, dropped;
static int64_t run_opened, run_total, run_count;
static int32_t run_index;

static inline int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void record(int32_t site, int64_t start, int64_t duration) {
  if (recorded < capacity) {
    gf_event *e = &events[recorded++];
    e->site = site;
    e->run = run_index;
    e->start_ns = start;
    e->duration_ns = duration;
  } else if (capacity) {
    dropped++;
  }
}

/* Room for `n` call sites and `event_capacity` events, all counters zero; 0 on success. */
GF_EXPORT int32_t graphfuse_profile_setup(int32_t n, int64_t event_capacity) {
  free(totals);
  free(counts);
  free(opened);
  free(events);
  sites = 0;
  ready = 0;
  capacity = 0;
  totals = calloc(n > 0 ? n : 1, sizeof(int64_t));
  counts = calloc(n > 0 ? n : 1, sizeof(int64_t));
  opened = calloc(n > 0 ? n : 1, sizeof(int64_t));
  events = event_capacity > 0 ? calloc(event_capacity, sizeof(gf_event)) : NULL;
  if (!totals || !counts || !opened || (event_capacity > 0 && !events))
    return -1;
  sites = n;
  ready = 1;
  capacity = event_capacity;
  recorded = dropped = run_total = run_count = 0;
  run_index = 0;
  return 0;
}

GF_EXPORT void graphfuse_profile_enter(int32_t site) {
  if (site >= 0 && site < sites)
    opened[site] = now_ns();
}

GF_EXPORT void graphfuse_profile_exit(int32_t site) {
  int64_t end = now_ns();
  if (site < 0 || site >= sites)
    return;
  int64_t duration = end - opened[site];
  totals[site] += duration;
  counts[site] += 1;
  record(site, opened[site], duration);
}

GF_EXPORT void graphfuse_profile_run_begin(void) { run_opened = now_ns(); }

GF_EXPORT void graphfuse_profile_run_end(void) {
  int64_t end = now_ns();
  if (!ready)
    return;
  run_total += end - run_opened;
  run_count += 1;
  record(-1, run_opened, end - run_opened);
  run_index += 1;
}

/* Nanoseconds one enter/exit pair costs on this machine (`pairs` of them on site 0, which
 * the caller sets up again afterwards); -1 before setup. */
GF_EXPORT double graphfuse_profile_pair_ns(int64_t pairs) {
  if (!sites || pairs < 1)
    return -1;
  int64_t begin = now_ns();
  for (int64_t i = 0; i < pairs; i++) {
    graphfuse_profile_enter(0);
    graphfuse_profile_exit(0);
  }
  return (double)(now_ns() - begin) / (double)pairs;
}

/* Per-site totals and counts into the caller's arrays (`sites` each); `summary` gets the
 * whole runs' total time and count, the events recorded and those dropped. */
GF_EXPORT void graphfuse_profile_read(int64_t *totals_out, int64_t *counts_out,
                                      int64_t *summary) {
  if (sites) {
    memcpy(totals_out, totals, sites * sizeof(int64_t));
    memcpy(counts_out, counts, sites * sizeof(int64_t));
  }
  summary[0] = run_total;
  summary[1] = run_count;
  summary[2] = recorded;
  summary[3] = dropped;
}

/* Copies the recorded events into `out` (room for `room`); returns how many. */
GF_EXPORT int64_t graphfuse_profile_events(gf_event *out, int64_t room) {
  int64_t n = recorded < room ? recorded : room;
  if (n > 0)
    memcpy(out, events, n * sizeof(gf_event));
  return n;
}

/* ---- Peak FLOP rate: independent FMA chains, enough of them to cover the FMA latency
 * times the number of FMA units, on vectors of the widest kind this CPU has (picked at
 * run time, so the runtime built on one x86 machine runs on another). Each step of each
 * chain is one fused multiply-add per lane, counted as 2 FLOPs. */

#define GF_CHAINS 12

typedef float gf_v16 __attribute__((vector_size(64)));
typedef float gf_v8 __attribute__((vector_size(32)));
typedef float gf_v4 __attribute__((vector_size(16)));

#define GF_FMA_LOOP(VEC, LANES)                                                            \
  VEC acc[GF_CHAINS];                                                                      \
  VEC a, b;                                                                                \
  for (int l = 0; l < (LANES); l++) {                                                      \
    a[l] = 0.9999999f;                                                                     \
    b[l] = 1e-7f;                                                                          \
  }                                                                                        \
  for (int c = 0; c < GF_CHAINS; c++)                                                      \
    for (int l = 0; l < (LANES); l++)                                                      \
      acc[c][l] = (float)(c + l);                                                          \
  for (int64_t i = 0; i < steps; i++) {                                                    \
    _Pragma("GCC unroll 16") /* all chains in registers, not stored each step */           \
    for (int c = 0; c < GF_CHAINS; c++)                                                    \
      acc[c] = acc[c] * a + b; /* contracted to an FMA; never reassociated */            \
  }                                                                                        \
  float sum = 0;                                                                           \
  for (int c = 0; c < GF_CHAINS; c++)                                                      \
    for (int l = 0; l < (LANES); l++)                                                      \
      sum += acc[c][l];                                                                    \
  *sink = sum;                                                                             \
  return 2.0 * (double)steps * GF_CHAINS * (LANES);

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static double fma_avx512(int64_t steps, float *sink) {
  GF_FMA_LOOP(gf_v16, 16)
}
__attribute__((target("avx2,fma"))) static double fma_avx2(int64_t steps, float *sink) {
  GF_FMA_LOOP(gf_v8, 8)
}
#endif
static double fma_generic(int64_t steps, float *sink) { GF_FMA_LOOP(gf_v4, 4) }

/* The vector kind the FMA loop uses: 16, 8 or 4 f32 lanes. */
GF_EXPORT int32_t graphfuse_profile_fma_lanes(void) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f"))
    return 16;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return 8;
#endif
  return 4;
}

static double fma_steps(int64_t steps, float *sink) {
#if defined(__x86_64__)
  int32_t lanes = graphfuse_profile_fma_lanes();
  if (lanes == 16)
    return fma_avx512(steps, sink);
  if (lanes == 8)
    return fma_avx2(steps, sink);
#endif
  return fma_generic(steps, sink);
}

typedef struct {
  int64_t steps;
  double flops;
  float sink;
} gf_fma_job;

static void *fma_worker(void *arg) {
  gf_fma_job *job = arg;
  job->flops = fma_steps(job->steps, &job->sink);
  return NULL;
}

/* FLOPs per second of `threads` threads each running `steps` steps of the FMA chains
 * (the calling thread is one of them); -1 when a thread cannot be started. */
GF_EXPORT double graphfuse_profile_fma_rate(int32_t threads, int64_t steps) {
  if (threads < 1)
    threads = 1;
  gf_fma_job *jobs = calloc(threads, sizeof(gf_fma_job));
  pthread_t *ids = calloc(threads, sizeof(pthread_t));
  if (!jobs || !ids) {
    free(jobs);
    free(ids);
    return -1;
  }
  int started = 0;
  int64_t begin = now_ns();
  for (int t = 1; t < threads; t++) {
    jobs[t].steps = steps;
    if (pthread_create(&ids[t], NULL, fma_worker, &jobs[t]) != 0)
      break;
    started++;
  }
  jobs[0].steps = steps;
  fma_worker(&jobs[0]);
  double flops = jobs[0].flops;
  for (int t = 1; t <= started; t++) {
    pthread_join(ids[t], NULL);
    flops += jobs[t].flops;
  }
  int64_t elapsed = now_ns() - begin;
  free(jobs);
  free(ids);
  if (started != threads - 1 || elapsed <= 0)
    return -1;
  return flops / ((double)elapsed * 1e-9);
}
