/* graphfuse's parallel runtime: the part of the OpenMP runtime ABI (libomp's __kmpc_*
 * entry points) that MLIR's `convert-scf-to-openmp` + `convert-openmp-to-llvm` code calls
 * for an `scf.parallel` without reductions, dynamically scheduled (`parallel.py` sets the
 * schedule), under graphfuse's own names (the build renames `__kmpc_` to `graphfuse_kmpc_`
 * in the kernels' LLVM IR, so another OpenMP runtime in the process is neither used nor
 * overridden).
 *
 * Why not MLIR's async runtime or libomp: the async runtime wakes sleeping workers through
 * condition variables for every parallel loop and oversubscribes the cores (caller plus a
 * full pool); a memory-bound kernel on 2 cores ran at 1.4x of one core instead of 2x.
 * libomp is not part of the pinned toolchain. This pool keeps its workers spinning for a
 * couple of milliseconds after each loop, so the back-to-back loops of one graph start
 * without a wake-up, and then sleeps them on a condition variable.
 *
 * The threads a region asks for (the kernels push the count they were built for) are
 * capped by graphfuse_parallel_set_threads, or else by GRAPHFUSE_NUM_THREADS in the
 * environment, read once at the first region: one cap for every graphfuse library in the
 * process, as they share this runtime.
 *
 * The calling thread is member 0 of every team. A parallel region entered while another
 * is running (nested loops, or two application threads calling kernels at once) runs on
 * the calling thread alone, with a team of one, so it never waits on a busy pool.
 *
 * Workers join a region; they are not waited for. A worker that is asleep, or descheduled
 * on a loaded machine, when a region starts would otherwise hold the whole region until
 * the OS runs it again (milliseconds, for a loop of microseconds: a tiny ResNet took 18 ms
 * instead of 0.1 ms on 2 busy cores). So a worker counts itself in (`join_state`) before
 * it runs its member, and the region closes to newcomers when its first member reaches
 * the barrier that ends the loop (every chunk is handed out by then) or when the master
 * is done: the barrier and the join wait only for the members that joined. A worker that
 * comes too late finds the region closed and waits for the next one.
 */
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define GF_EXPORT __attribute__((visibility("default")))
#define GF_MAX_THREADS 256
#define GF_SPIN_NS 100000 /* how long an idle worker spins before it sleeps: 0.1 ms */

typedef void (*microtask_t)(int32_t *gtid, int32_t *btid, ...);

struct team {
  microtask_t task;
  int argc;
  void *args[8];
  int size;
  /* The region's dynamically scheduled loop (iterations [first, last], 1-based as
   * OpenMPIRBuilder normalises them): chunks are taken from `next` by compare-and-swap. */
  atomic_int loop_state; /* 0: not set up, 1: being set up, 2: ready */
  uint64_t last;
  uint64_t chunk;
  _Atomic uint64_t next;
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER; /* held by the team's master */
static pthread_mutex_t sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sleep_cond = PTHREAD_COND_INITIALIZER;
static int workers;                        /* pool threads started so far */
static struct team current;                /* the running team, written before `generation` */
static atomic_int team_size;               /* current.size, the one field non-members read */
static atomic_ulong generation;            /* bumped once per parallel region */
static atomic_int sleepers;                /* workers waiting on sleep_cond */
/* The current region's members: its generation (high 32 bits), CLOSED, and how many
 * members joined it, the master included (low bits). */
static _Atomic uint64_t join_state;
#define JOIN_CLOSED (1ull << 31)
#define JOIN_COUNT 0x7fffffffull
static atomic_int finished;                /* workers done with the current region */
static atomic_int barrier_count;           /* arrivals at the team barrier */
static atomic_ulong barrier_phase;         /* bumped when the last member arrives */

static _Thread_local int32_t my_id;        /* this thread's member number in its team */
static _Thread_local struct team *my_team; /* the team it runs a member of (NULL: none) */
static _Thread_local int my_loops;         /* dynamic loops this member has entered */
static _Thread_local int32_t pushed_threads;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* One step of waiting for another member: a pause, and after GF_WAIT_SPINS of them a
 * yield of the core, so that on a machine with more runnable threads than cores the member
 * waited for (descheduled) can run sooner instead of this thread spinning out its slice. */
#define GF_WAIT_SPINS 4096
static inline void wait_step(unsigned *spins) {
  if (++*spins < GF_WAIT_SPINS)
    cpu_relax();
  else
    sched_yield();
}

static void run_member(struct team *team, int32_t id) {
  int32_t gtid = id, btid = 0;
  struct team *outer_team = my_team;
  int32_t outer_id = my_id;
  int outer_loops = my_loops;
  my_team = team;
  my_id = id;
  my_loops = 0;
  void **a = (void **)team->args;
  switch (team->argc) {
  case 0: team->task(&gtid, &btid); break;
  case 1: team->task(&gtid, &btid, a[0]); break;
  case 2: team->task(&gtid, &btid, a[0], a[1]); break;
  case 3: team->task(&gtid, &btid, a[0], a[1], a[2]); break;
  case 4: team->task(&gtid, &btid, a[0], a[1], a[2], a[3]); break;
  case 5: team->task(&gtid, &btid, a[0], a[1], a[2], a[3], a[4]); break;
  case 6: team->task(&gtid, &btid, a[0], a[1], a[2], a[3], a[4], a[5]); break;
  case 7: team->task(&gtid, &btid, a[0], a[1], a[2], a[3], a[4], a[5], a[6]); break;
  default: team->task(&gtid, &btid, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]); break;
  }
  my_team = outer_team;
  my_id = outer_id;
  my_loops = outer_loops;
}

static unsigned long start_generation[GF_MAX_THREADS]; /* as of each worker's creation */

/* Counts the calling worker into region `region` (the low 32 bits of its generation)
 * unless it has closed or a later one has started. */
static int join_region(uint32_t region) {
  uint64_t state = atomic_load_explicit(&join_state, memory_order_acquire);
  for (;;) {
    if ((uint32_t)(state >> 32) != region || (state & JOIN_CLOSED))
      return 0;
    if (atomic_compare_exchange_weak_explicit(&join_state, &state, state + 1,
                                              memory_order_acq_rel, memory_order_acquire))
      return 1;
  }
}

/* Closes the current region to newcomers; returns how many members joined it. */
static int close_region(void) {
  uint64_t state = atomic_fetch_or_explicit(&join_state, JOIN_CLOSED, memory_order_acq_rel);
  return (int)(state & JOIN_COUNT);
}

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void *worker_main(void *arg) {
  int32_t id = (int32_t)(intptr_t)arg;
  unsigned long seen = start_generation[id]; /* the region being started is still to run */
  for (;;) {
    uint64_t since = now_ns();
    unsigned spins = 0;
    while (atomic_load_explicit(&generation, memory_order_acquire) == seen) {
      cpu_relax();
      if (++spins % 64 != 0 || now_ns() - since < GF_SPIN_NS)
        continue;
      pthread_mutex_lock(&sleep_lock);
      atomic_fetch_add(&sleepers, 1);
      while (atomic_load(&generation) == seen)
        pthread_cond_wait(&sleep_cond, &sleep_lock);
      atomic_fetch_sub(&sleepers, 1);
      pthread_mutex_unlock(&sleep_lock);
    }
    seen = atomic_load_explicit(&generation, memory_order_acquire);
    int size = atomic_load_explicit(&team_size, memory_order_relaxed);
    /* Once joined, the master waits for this member, so `current` is stable here. */
    if (id < size && join_region((uint32_t)seen)) {
      run_member(&current, id);
      atomic_fetch_add_explicit(&finished, 1, memory_order_release);
    }
  }
  return NULL;
}

static int default_threads(void) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return cores < 1 ? 1 : (int)cores;
}

static atomic_int thread_cap; /* 0: none */
static pthread_once_t thread_cap_once = PTHREAD_ONCE_INIT;

static int clamp_threads(long threads) {
  return threads <= 0 ? 0 : threads > GF_MAX_THREADS ? GF_MAX_THREADS : (int)threads;
}

static void read_thread_cap(void) {
  const char *text = getenv("GRAPHFUSE_NUM_THREADS");
  char *end = NULL;
  long threads = text != NULL ? strtol(text, &end, 10) : 0;
  if (text != NULL && end != text && *end == '\0')
    atomic_store(&thread_cap, clamp_threads(threads));
}

/* Caps the threads of every parallel region at `threads` (<= 0: no cap); returns the cap
 * now in force (0: none). Overrides GRAPHFUSE_NUM_THREADS. */
GF_EXPORT int graphfuse_parallel_set_threads(int threads) {
  pthread_once(&thread_cap_once, read_thread_cap);
  atomic_store(&thread_cap, clamp_threads(threads));
  return atomic_load(&thread_cap);
}

static int capped(int wanted) {
  pthread_once(&thread_cap_once, read_thread_cap);
  int cap = atomic_load_explicit(&thread_cap, memory_order_relaxed);
  return cap > 0 && wanted > cap ? cap : wanted;
}

/* In a child of fork() only the forking thread exists: forget the parent's workers (a
 * team would wait for them forever) and any lock a parent thread held. */
static void forget_pool_after_fork(void) {
  workers = 0;
  pthread_mutex_init(&pool_lock, NULL);
  pthread_mutex_init(&sleep_lock, NULL);
  pthread_cond_init(&sleep_cond, NULL);
  atomic_store(&sleepers, 0);
  atomic_store(&finished, 0);
  atomic_store(&join_state, 0);
  my_id = 0;
  my_team = NULL;
}

static pthread_once_t fork_handler_once = PTHREAD_ONCE_INIT;

static void install_fork_handler(void) { pthread_atfork(NULL, NULL, forget_pool_after_fork); }

/* Start workers 1..size-1; returns how many members a team can have. */
static int grow_pool(int size) {
  pthread_once(&fork_handler_once, install_fork_handler);
  if (size > GF_MAX_THREADS)
    size = GF_MAX_THREADS;
  while (workers + 1 < size) {
    pthread_t thread;
    pthread_attr_t attr;
    start_generation[workers + 1] = atomic_load(&generation);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int failed = pthread_create(&thread, &attr, worker_main, (void *)(intptr_t)(workers + 1));
    pthread_attr_destroy(&attr);
    if (failed)
      break;
    workers++;
  }
  return workers + 1 < size ? workers + 1 : size;
}

GF_EXPORT int32_t graphfuse_kmpc_global_thread_num(void *loc) {
  (void)loc;
  return my_id;
}

GF_EXPORT void graphfuse_kmpc_push_num_threads(void *loc, int32_t gtid, int32_t threads) {
  (void)loc;
  (void)gtid;
  pushed_threads = threads;
}

GF_EXPORT void graphfuse_kmpc_fork_call(void *loc, int32_t argc, microtask_t task, ...) {
  (void)loc;
  struct team team = {.task = task, .argc = argc, .size = 1, .loop_state = 0};
  if (argc > 8) {
    fprintf(stderr, "graphfuse parallel runtime: a parallel region with %d arguments (at most 8)\n", argc);
    abort();
  }
  va_list ap;
  va_start(ap, task);
  for (int i = 0; i < argc; i++)
    team.args[i] = va_arg(ap, void *);
  va_end(ap);
  int wanted = capped(pushed_threads > 0 ? pushed_threads : default_threads());
  pushed_threads = 0;
  int nested = my_team != NULL && my_team->size > 1;
  if (wanted <= 1 || nested || pthread_mutex_trylock(&pool_lock) != 0) {
    run_member(&team, 0);
    return;
  }
  team.size = grow_pool(wanted);
  current.task = team.task;
  current.argc = team.argc;
  for (int i = 0; i < argc; i++)
    current.args[i] = team.args[i];
  current.size = team.size;
  atomic_store(&current.loop_state, 0);
  atomic_store_explicit(&team_size, team.size, memory_order_relaxed);
  atomic_store(&barrier_count, 0);
  atomic_store(&finished, 0);
  /* Open to members of the new generation (the master counted), before it is published. */
  unsigned long next = atomic_load(&generation) + 1;
  atomic_store(&join_state, ((uint64_t)(uint32_t)next << 32) | 1u);
  /* Sequentially consistent, like the sleepers count a worker raises before it last looks
   * at `generation`: either the worker sees this region or this thread sees it asleep. */
  atomic_fetch_add(&generation, 1);
  if (atomic_load(&sleepers) > 0) {
    pthread_mutex_lock(&sleep_lock);
    pthread_cond_broadcast(&sleep_cond);
    pthread_mutex_unlock(&sleep_lock);
  }
  run_member(&current, 0);
  int members = close_region();
  unsigned spins = 0;
  while (atomic_load_explicit(&finished, memory_order_acquire) < members - 1)
    wait_step(&spins);
  pthread_mutex_unlock(&pool_lock);
}

/* Waits for the members that joined the region (closing it: a barrier ends the region's
 * one worksharing loop, whose chunks are all handed out once a member gets here). */
GF_EXPORT void graphfuse_kmpc_barrier(void *loc, int32_t gtid) {
  (void)loc;
  (void)gtid;
  if (my_team == NULL || my_team->size <= 1)
    return;
  int size = close_region();
  if (size <= 1)
    return;
  unsigned long phase = atomic_load_explicit(&barrier_phase, memory_order_acquire);
  if (atomic_fetch_add_explicit(&barrier_count, 1, memory_order_acq_rel) == size - 1) {
    atomic_store_explicit(&barrier_count, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&barrier_phase, 1, memory_order_release);
    return;
  }
  unsigned spins = 0;
  while (atomic_load_explicit(&barrier_phase, memory_order_acquire) == phase)
    wait_step(&spins);
}


/* Dynamic schedules (what `omp.wsloop schedule(dynamic)` calls; graphfuse asks for it so
 * that a member slowed by the machine does not hold the others at the region's end).
 * Chunks are guided: a member takes 1/(2 x team size) of what is left, at least the
 * requested chunk, so a loop is handed out in a few dozen pieces whatever its length.
 * graphfuse's regions hold one worksharing loop each (one per scf.parallel). */
static void dispatch_init(int32_t schedule, uint64_t first, uint64_t last, int64_t incr,
                          uint64_t chunk) {
  struct team *team = my_team;
  if (team == NULL || incr != 1 || my_loops++ > 0) {
    fprintf(stderr, "graphfuse parallel runtime: unsupported loop (schedule %d, step %lld, "
            "or a second loop in one region)\n", schedule, (long long)incr);
    abort();
  }
  int expected = 0;
  if (atomic_compare_exchange_strong(&team->loop_state, &expected, 1)) {
    team->last = last;
    team->chunk = chunk < 1 ? 1 : chunk;
    atomic_store(&team->next, first);
    atomic_store_explicit(&team->loop_state, 2, memory_order_release);
    return;
  }
  while (atomic_load_explicit(&team->loop_state, memory_order_acquire) != 2)
    cpu_relax();
}

static int dispatch_next(int32_t *is_last, uint64_t *lower, uint64_t *upper) {
  struct team *team = my_team;
  uint64_t start = atomic_load(&team->next);
  for (;;) {
    if (start > team->last)
      return 0;
    uint64_t left = team->last - start + 1;
    uint64_t size = left / (2 * (uint64_t)team->size);
    size = size < team->chunk ? team->chunk : size;
    size = size > left ? left : size;
    if (atomic_compare_exchange_weak(&team->next, &start, start + size)) {
      *lower = start;
      *upper = start + size - 1;
      *is_last = *upper == team->last;
      return 1;
    }
  }
}

#define DISPATCH(SUFFIX, T)                                                                  \
  GF_EXPORT void graphfuse_kmpc_dispatch_init_##SUFFIX(void *loc, int32_t gtid,              \
                                                       int32_t schedule, T first, T last,   \
                                                       T incr, T chunk) {                   \
    (void)loc;                                                                               \
    (void)gtid;                                                                              \
    dispatch_init(schedule, (uint64_t)first, (uint64_t)last, (int64_t)incr, (uint64_t)chunk);\
  }                                                                                          \
  GF_EXPORT int32_t graphfuse_kmpc_dispatch_next_##SUFFIX(void *loc, int32_t gtid,           \
                                                          int32_t *is_last, T *lower,       \
                                                          T *upper, T *stride) {            \
    (void)loc;                                                                               \
    (void)gtid;                                                                              \
    uint64_t lo, hi;                                                                         \
    if (!dispatch_next(is_last, &lo, &hi))                                                   \
      return 0;                                                                              \
    *lower = (T)lo;                                                                          \
    *upper = (T)hi;                                                                          \
    *stride = 1;                                                                             \
    return 1;                                                                                \
  }                                                                                          \
  GF_EXPORT void graphfuse_kmpc_dispatch_fini_##SUFFIX(void *loc, int32_t gtid) {            \
    (void)loc;                                                                               \
    (void)gtid;                                                                              \
  }

DISPATCH(4, int32_t)
DISPATCH(4u, uint32_t)
DISPATCH(8, int64_t)
DISPATCH(8u, uint64_t)
