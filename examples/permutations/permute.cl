// permute.cl: lexicographic permutations, any slice [first, first + count).
//
// Each work-item owns PER_ITEM = steps + 1 consecutive permutations: it finds the first
// one by decomposing its index (the factorial number system for n distinct elements,
// multinomial counts for a multiset), then steps forward with next_permutation `steps`
// times. Decomposition costs O(n^2) with 64-bit divisions; a next_permutation step costs
// a few comparisons on average, so the hybrid spends less per permutation than pure
// decomposition (steps = 0) while keeping every work-item independent.
//
// Output: n bytes per permutation, permutation first + i at out[i * n]. The elements are
// the values 0..n-1 (distinct) or the multiset's symbols (bytes, ascending), so
// lexicographic order of the output equals the order of the indices.
//
// Stores: a work-item's permutations are consecutive in the output, so neighbouring
// work-items write at a stride of PER_ITEM * n bytes; storing bytes straight to global
// memory from there would touch a separate memory sector per work-item and byte. Instead
// each work-item writes into the work-group's stage in local memory (packed into 32-bit
// words when PER_ITEM * n is a multiple of 4 and the device is little-endian), and the
// work-group copies its contiguous stretch of the output out with 16-byte stores.
//
// Limits: a distinct set has at most 20 elements (20! < 2^64 <= 21!); a multiset has at
// most MAX_ELEMENTS elements and fewer than 2^64 distinct permutations (the host checks).

#ifndef MAX_ELEMENTS
#define MAX_ELEMENTS 64
#endif
#define MAX_DISTINCT 20

__constant ulong k_factorial[MAX_DISTINCT + 1] = {
    1UL, 1UL, 2UL, 6UL, 24UL, 120UL, 720UL, 5040UL, 40320UL, 362880UL, 3628800UL,
    39916800UL, 479001600UL, 6227020800UL, 87178291200UL, 1307674368000UL,
    20922789888000UL, 355687428096000UL, 6402373705728000UL, 121645100408832000UL,
    2432902008176640000UL};

// k / d for k, d < 2^64, through a 32-bit division where both fit (most of the time
// on a GPU, where 64-bit division is a long software sequence).
inline ulong div64(ulong k, ulong d) {
  if (k < d) return 0;
  if ((k >> 32) == 0) return (ulong)((uint)k / (uint)d);
  return k / d;
}

// Permutation k (from 0) of 0..n-1, n <= 20: the digits of k in the factorial number
// system pick, position by position, among the values not yet used (a bit mask).
inline void nth_distinct(ulong k, uint n, uchar* p) {
  uint avail = (n >= 32u) ? 0xffffffffu : ((1u << n) - 1u);
  for (uint i = 0; i < n; ++i) {
    const ulong f = k_factorial[n - 1u - i];
    const uint d = (uint)div64(k, f);
    k -= (ulong)d * f;
    uint m = avail;
    for (uint s = 0; s < d; ++s) m &= m - 1u;  // drop the d lowest free values
    const uint v = popcount((m & (0u - m)) - 1u);  // index of the lowest remaining one
    avail &= ~(1u << v);
    p[i] = (uchar)v;
  }
}

inline uint gcd_u(uint a, uint b) {
  while (b != 0u) {
    const uint t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// Permutation k (from 0) of the multiset with `distinct` symbols sym[0] < sym[1] < ...
// occurring cnt[v] times, n in all, `total` distinct permutations. At each position the
// permutations that start with symbol v number m * c[v] / r (m: those of the r
// remaining elements), computed as (m / (r / g)) * (c[v] / g) with g = gcd(c[v], r):
// exact, and never above m, so nothing overflows.
inline void nth_multiset(ulong k, uint n, uint distinct, __constant const uchar* sym,
                         __constant const uchar* cnt, ulong total, uchar* p) {
  uchar c[MAX_ELEMENTS];
  for (uint v = 0; v < distinct; ++v) c[v] = cnt[v];
  ulong m = total;
  uint r = n;
  for (uint i = 0; i < n; ++i, --r) {
    for (uint v = 0; v < distinct; ++v) {
      const uint cv = c[v];
      if (cv == 0u) continue;
      const uint g = gcd_u(cv, r);
      const ulong mv = div64(m, (ulong)(r / g)) * (ulong)(cv / g);
      if (k < mv) {
        p[i] = sym[v];
        c[v] = (uchar)(cv - 1u);
        m = mv;
        break;
      }
      k -= mv;
    }
  }
}

// std::next_permutation on p[0..n), for distinct elements and multisets alike. The caller
// never steps past the last permutation of the slice, so the wrap-around case is unused.
inline void next_permutation(uchar* p, uint n) {
  int i = (int)n - 2;
  while (i >= 0 && p[i] >= p[i + 1]) --i;
  if (i < 0) return;
  int j = (int)n - 1;
  while (p[j] <= p[i]) --j;
  uchar t = p[i];
  p[i] = p[j];
  p[j] = t;
  for (int a = i + 1, b = (int)n - 1; a < b; ++a, --b) {
    t = p[a];
    p[a] = p[b];
    p[b] = t;
  }
}

// out:      the batch's output, count * n bytes from its start (16-byte aligned).
// first:    index of the batch's first permutation; count: permutations in the batch.
// n:        elements per permutation; steps: next_permutation steps per work-item.
// multiset: 0: the values 0..n-1; 1: sym/cnt/distinct/total describe a multiset.
// words:    1 when (steps + 1) * n % 4 == 0 and the device is little-endian: the stage
//           is written in 32-bit words.
// stage:    local memory, get_local_size(0) * (steps + 1) * n bytes.
__kernel void permute(__global uchar* out, ulong first, ulong count, uint n, uint steps,
                      uint multiset, __constant const uchar* sym, __constant const uchar* cnt,
                      uint distinct, ulong total, uint words, __local uint4* stage) {
  const uint lid = (uint)get_local_id(0);
  const uint lsz = (uint)get_local_size(0);
  const ulong per_item = (ulong)steps + 1UL;
  const ulong group_first = (ulong)get_group_id(0) * (ulong)lsz * per_item;
  const ulong mine = group_first + (ulong)lid * per_item;
  __local uchar* stage_bytes = (__local uchar*)stage;

  if (mine < count) {
    const uint todo = (uint)min(per_item, count - mine);
    uchar p[MAX_ELEMENTS];
    if (multiset)
      nth_multiset(first + mine, n, distinct, sym, cnt, total, p);
    else
      nth_distinct(first + mine, n, p);
    const uint item_bytes = (uint)per_item * n;
    if (words) {
      // (steps + 1) * n is a multiple of 4: this item's stretch starts on a word.
      __local uint* w = (__local uint*)stage + (lid * item_bytes >> 2);
      uint acc = 0u, shift = 0u;
      for (uint s = 0;;) {
        for (uint i = 0; i < n; ++i) {
          acc |= (uint)p[i] << shift;
          shift += 8u;
          if (shift == 32u) {
            *w++ = acc;
            acc = 0u;
            shift = 0u;
          }
        }
        if (++s == todo) break;
        next_permutation(p, n);
      }
      if (shift != 0u) *w = acc;  // only in a short last item
    } else {
      __local uchar* b = stage_bytes + lid * item_bytes;
      for (uint s = 0;;) {
        for (uint i = 0; i < n; ++i) b[i] = p[i];
        b += n;
        if (++s == todo) break;
        next_permutation(p, n);
      }
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);

  // The work-group's permutations are one contiguous stretch of the output.
  if (group_first < count) {
    const ulong group_perms = min((ulong)lsz * per_item, count - group_first);
    const uint bytes = (uint)(group_perms * n);
    __global uchar* g = out + group_first * n;
    uint done = 0;
    if (((group_first * n) & 15UL) == 0UL) {
      __global uint4* g4 = (__global uint4*)g;
      const uint vecs = bytes >> 4;
      for (uint x = lid; x < vecs; x += lsz) g4[x] = stage[x];
      done = vecs << 4;
    }
    for (uint x = done + lid; x < bytes; x += lsz) g[x] = stage_bytes[x];
  }
}
