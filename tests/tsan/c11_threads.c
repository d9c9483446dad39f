/* ThreadSanitizer builds only: C11 threads as POSIX threads that TSan can see.
 *
 * librdkafka (Debian's 2.0.2) makes its threads, mutexes and condition variables with
 * glibc's C11 functions (thrd_create, mtx_lock, cnd_wait ...), which call glibc's POSIX
 * code internally, past the interceptors of clang 14's ThreadSanitizer. A thread TSan did
 * not see start crashes in TSan's allocator at its first malloc, and locks TSan does not
 * see would make every hand-over between librdkafka's threads and ours look like a race.
 * Preloaded (LD_PRELOAD, scripts/sanitize.sh thread), this library puts each C11 call
 * through the POSIX function of the same meaning, which the process's TSan intercepts.
 * glibc lays mtx_t, cnd_t and once_flag out as pthread_mutex_t, pthread_cond_t and
 * pthread_once_t, and thrd_t is a pthread_t. Nothing else is built with it. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>

static int result(int rc) {
  return rc == 0 ? thrd_success : rc == ENOMEM ? thrd_nomem : rc == EBUSY ? thrd_busy : rc == ETIMEDOUT ? thrd_timedout : thrd_error;
}

struct start {
  thrd_start_t func;
  void *arg;
};

static void *run(void *p) {
  struct start s = *(struct start *)p;
  free(p);
  return (void *)(intptr_t)s.func(s.arg);
}

int thrd_create(thrd_t *thr, thrd_start_t func, void *arg) {
  struct start *s = malloc(sizeof *s);
  if (s == NULL) return thrd_nomem;
  s->func = func;
  s->arg = arg;
  const int rc = pthread_create(thr, NULL, run, s);
  if (rc != 0) free(s);
  return result(rc);
}

int thrd_join(thrd_t thr, int *res) {
  void *value = NULL;
  const int rc = pthread_join(thr, &value);
  if (rc == 0 && res != NULL) *res = (int)(intptr_t)value;
  return result(rc);
}

int thrd_detach(thrd_t thr) { return result(pthread_detach(thr)); }

int mtx_init(mtx_t *m, int type) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  if (type & mtx_recursive) pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
  const int rc = pthread_mutex_init((pthread_mutex_t *)m, &attr);
  pthread_mutexattr_destroy(&attr);
  return result(rc);
}
int mtx_lock(mtx_t *m) { return result(pthread_mutex_lock((pthread_mutex_t *)m)); }
int mtx_trylock(mtx_t *m) { return result(pthread_mutex_trylock((pthread_mutex_t *)m)); }
int mtx_timedlock(mtx_t *restrict m, const struct timespec *restrict t) {
  return result(pthread_mutex_timedlock((pthread_mutex_t *)m, t));
}
int mtx_unlock(mtx_t *m) { return result(pthread_mutex_unlock((pthread_mutex_t *)m)); }
void mtx_destroy(mtx_t *m) { pthread_mutex_destroy((pthread_mutex_t *)m); }

int cnd_init(cnd_t *c) { return result(pthread_cond_init((pthread_cond_t *)c, NULL)); }
int cnd_signal(cnd_t *c) { return result(pthread_cond_signal((pthread_cond_t *)c)); }
int cnd_broadcast(cnd_t *c) { return result(pthread_cond_broadcast((pthread_cond_t *)c)); }
int cnd_wait(cnd_t *c, mtx_t *m) { return result(pthread_cond_wait((pthread_cond_t *)c, (pthread_mutex_t *)m)); }
int cnd_timedwait(cnd_t *restrict c, mtx_t *restrict m, const struct timespec *restrict t) {
  return result(pthread_cond_timedwait((pthread_cond_t *)c, (pthread_mutex_t *)m, t));
}
void cnd_destroy(cnd_t *c) { pthread_cond_destroy((pthread_cond_t *)c); }

void call_once(once_flag *flag, void (*func)(void)) { pthread_once((pthread_once_t *)flag, func); }
