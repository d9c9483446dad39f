// scan.cl: exact multi-literal search over one chunk.
//
// The pattern set is a trie (built on the host by PatternTable): root_next[b] is the
// child of the root for byte b, root_pairs[b0 << 8 | b1] the node two bytes down, and
// deeper edges are found through node_info[n] (PatternTable::node_info(): nodes are
// numbered depth first, so n's first child is n + 1, and node_info holds its byte and
// whether n has other children) and, for the other children, an open-addressing hash
// table keyed by (node << 8 | byte), each slot the key and the child side by side.
// node_pattern[n] is the unique-pattern id that ends at node n. The tables refer to node
// n as n | ENDS when a pattern ends there, so node_pattern is read only to report.
//
// Each work-item takes POSITIONS consecutive start positions; from each position p it
// walks the trie and reports every pattern that occurs at p: (p, id) pairs, overlapping
// ones included. scan() walks where the position is; scan_compact() (what GPUs run, see
// ScanProgram) gathers a work-group's walks past the gate first and then takes them side
// by side. The two direct tables make the first two steps (where most walks end)
// cost no hash probe, and two gates of bits stop most of the rest before the third: a
// word per hashed three-byte prefix (prefix_words, PatternTable::prefix_words()), bit 0
// for a pattern of exactly those three bytes, bit 1 + (b3 * 7) % 31 for a longer one
// whose fourth byte is b3; then a word per hashed four-byte prefix (deep_words), bit 0 for
// a pattern of exactly four bytes, bit 1 + (b4 * 7) % 31 for a longer one (DEEP_GATE).
// A chunk may begin with `overlap` bytes repeated from the previous
// piece of an over-long line; an occurrence belongs to this chunk only if it ends past
// them (p + length > overlap), so the one that lies wholly inside the overlap is
// reported once, by the previous chunk.
//
// Every owned occurrence increments *total. With `locate`, the first `capacity` of them
// are written to `out`; the host compares *total with capacity and rescans with a larger
// buffer, so nothing is dropped silently. With `count_patterns`, per-pattern occurrence
// counts accumulate in pattern_counts.

#define NO_NODE 0u
#define NO_PATTERN 0xffffffffu
#define ENDS 0x80000000u
#define EMPTY_KEY 0xffffffffffffffffUL
#ifndef POSITIONS
#define POSITIONS 1u  // set by Matcher (-DPOSITIONS=n): 4 on GPUs, 1 on CPU devices
#endif
#ifndef DEEP_GATE
#define DEEP_GATE 0  // set by ScanProgram (-DDEEP_GATE=1) where the second gate pays
#endif

inline uchar fold(uchar c, uint ignore_case) {
  return (ignore_case && c >= (uchar)'A' && c <= (uchar)'Z') ? (uchar)(c + 32) : c;
}

inline uint child(uint node, uchar c, __global const ushort* node_info, __global const ulong2* edges, uint mask) {
  uint info = node_info[node];
  if ((info & 0x100u) == 0u) return NO_NODE;  // no child
  if ((info & 0xffu) == (uint)c) return (node + 1u) | ((info & 0x400u) != 0u ? ENDS : 0u);  // the first
  if ((info & 0x200u) == 0u) return NO_NODE;  // no other
  ulong key = ((ulong)node << 8) | (ulong)c;
  uint h = (uint)((key * 0x9E3779B97F4A7C15UL) >> 32) & mask;
  for (;;) {
    ulong2 slot = edges[h];
    if (slot.x == key) return (uint)slot.y;
    if (slot.x == EMPTY_KEY) return NO_NODE;
    h = (h + 1u) & mask;
  }
}

inline void report(uint ref, uint p, uint depth, uint overlap, __global const uint* node_pattern,
                   __global uint2* out, uint capacity, __global uint* total, uint locate,
                   __global uint* pattern_counts, uint count_patterns) {
  if ((ref & ENDS) != 0u && p + depth > overlap) {
    uint id = node_pattern[ref & ~ENDS];
    uint slot = atomic_inc(total);
    if (locate && slot < capacity) out[slot] = (uint2)(p, id);
    if (count_patterns) atomic_inc(&pattern_counts[id]);
  }
}

// Whether the gates in global memory let a walk take its third step at p (c0 c1 c2 read):
// the first keyed by three bytes, with a bit for the fourth; then, with DEEP_GATE and
// unless a pattern of three bytes may end here, the second keyed by four, with a bit for
// the fifth. Without DEEP_GATE the second is not read (the code of the first alone: on the
// H100 the two-gate code was 8-20 % slower kernel-only from 1 to 100,000 literals).
inline uint gate_passes(__global const uchar* text, uint p, uint size, uint c0, uint c1, uint c2,
                        __global const uint* prefix_words, uint prefix_shift,
                        __global const uint* deep_words, uint deep_shift, uint ignore_case) {
  uint word = prefix_words[(((c0 << 16) | (c1 << 8) | c2) * 0x9E3779B1u) >> prefix_shift];
#if DEEP_GATE
  if ((word & 1u) != 0u) return 1u;
  if (p + 3u >= size) return 0u;
  uint c3 = (uint)fold(text[p + 3u], ignore_case);
  if ((word & (1u << (1u + (c3 * 7u) % 31u))) == 0u) return 0u;
  uint deep = deep_words[(((c0 << 24) | (c1 << 16) | (c2 << 8) | c3) * 0x85EBCA6Bu) >> deep_shift];
  uint wanted = 1u;
  if (p + 4u < size) wanted |= 1u << (1u + ((uint)fold(text[p + 4u], ignore_case) * 7u) % 31u);
  return (deep & wanted) != 0u ? 1u : 0u;
#else
  uint wanted = 1u;
  if (p + 3u < size) wanted |= 1u << (1u + ((uint)fold(text[p + 3u], ignore_case) * 7u) % 31u);
  return (word & wanted) != 0u ? 1u : 0u;
#endif
}

// The walk from depth 3 on, below `node` (two bytes down from p, c2 the third byte).
inline void walk_deep(__global const uchar* text, uint p, uint size, uint overlap, uint node, uchar c2,
                      __global const ushort* node_info, __global const ulong2* edges, uint edge_mask,
                      __global const uint* node_pattern, uint ignore_case,
                      __global uint2* out, uint capacity, __global uint* total, uint locate,
                      __global uint* pattern_counts, uint count_patterns) {
  node = child(node & ~ENDS, c2, node_info, edges, edge_mask);
  uint depth = 3u;
  while (node != NO_NODE) {
    report(node, p, depth, overlap, node_pattern, out, capacity, total, locate, pattern_counts, count_patterns);
    if (p + depth >= size) break;
    node = child(node & ~ENDS, fold(text[p + depth], ignore_case), node_info, edges, edge_mask);
    ++depth;
  }
}

__kernel void scan(__global const uchar* text, uint size, uint overlap,
                   __global const uint* root_next, __global const ulong2* edges, uint edge_mask,
                   __global const uint* node_pattern, uint ignore_case,
                   __global uint2* out, uint capacity, __global uint* total, uint locate,
                   __global uint* pattern_counts, uint count_patterns,
                   __global const uint* root_pairs, __global const uint* prefix_words,
                   uint prefix_shift, __global const ushort* node_info,
                   __global const uint* deep_words, uint deep_shift) {
  uint first = (uint)get_global_id(0) * POSITIONS;
  for (uint k = 0u; k < POSITIONS; ++k) {
    uint p = first + k;
    if (p >= size) return;
    uchar c0 = fold(text[p], ignore_case);
    uint node = root_next[c0];
    if (node == NO_NODE) continue;
    report(node, p, 1u, overlap, node_pattern, out, capacity, total, locate, pattern_counts, count_patterns);
    if (p + 1u >= size) continue;
    uchar c1 = fold(text[p + 1u], ignore_case);
    node = root_pairs[((uint)c0 << 8) | (uint)c1];
    if (node == NO_NODE) continue;
    report(node, p, 2u, overlap, node_pattern, out, capacity, total, locate, pattern_counts, count_patterns);
    if (p + 2u >= size) continue;
    uchar c2 = fold(text[p + 2u], ignore_case);
    if (gate_passes(text, p, size, c0, c1, c2, prefix_words, prefix_shift, deep_words, deep_shift,
                    ignore_case) == 0u) continue;
    walk_deep(text, p, size, overlap, node, c2, node_info, edges, edge_mask, node_pattern, ignore_case,
              out, capacity, total, locate, pattern_counts, count_patterns);
  }
}

// scan() with the walks gathered: a work-group's work-items first take their positions'
// first two steps and the gate, and put each walk that goes on into `walks` (local
// memory, a place for every position of the group); then the group's work-items take
// those walks one each. In scan() a warp whose positions hold one walk waits as long as
// that walk for all of them; here the walks run side by side in as few warps as there
// are walks / 32, and the other warps are done. The first steps repeat scan()'s, written
// out: drawn into one inline function with early returns for both kernels, they made
// PoCL's scan() a quarter slower (100,000 literals here: 0.35 -> 0.27 GB/s).
__kernel void scan_compact(__global const uchar* text, uint size, uint overlap,
                           __global const uint* root_next, __global const ulong2* edges, uint edge_mask,
                           __global const uint* node_pattern, uint ignore_case,
                           __global uint2* out, uint capacity, __global uint* total, uint locate,
                           __global uint* pattern_counts, uint count_patterns,
                           __global const uint* root_pairs, __global const uint* prefix_words,
                           uint prefix_shift, __global const ushort* node_info,
                           __global const uint* deep_words, uint deep_shift, __local uint2* walks) {
  __local uint count;
  if (get_local_id(0) == 0) count = 0u;
  barrier(CLK_LOCAL_MEM_FENCE);
  uint first = (uint)get_global_id(0) * POSITIONS;
  for (uint k = 0u; k < POSITIONS; ++k) {
    uint p = first + k;
    if (p >= size) break;
    uchar c0 = fold(text[p], ignore_case);
    uint node = root_next[c0];
    if (node == NO_NODE) continue;
    report(node, p, 1u, overlap, node_pattern, out, capacity, total, locate, pattern_counts, count_patterns);
    if (p + 1u >= size) continue;
    uchar c1 = fold(text[p + 1u], ignore_case);
    node = root_pairs[((uint)c0 << 8) | (uint)c1];
    if (node == NO_NODE) continue;
    report(node, p, 2u, overlap, node_pattern, out, capacity, total, locate, pattern_counts, count_patterns);
    if (p + 2u >= size) continue;
    uchar c2 = fold(text[p + 2u], ignore_case);
    if (gate_passes(text, p, size, c0, c1, c2, prefix_words, prefix_shift, deep_words, deep_shift,
                    ignore_case) == 0u) continue;
    walks[atomic_inc(&count)] = (uint2)(p, node);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  uint n = count;
  for (uint i = (uint)get_local_id(0); i < n; i += (uint)get_local_size(0)) {
    uint2 w = walks[i];
    walk_deep(text, w.x, size, overlap, w.y, fold(text[w.x + 2u], ignore_case), node_info, edges, edge_mask,
              node_pattern, ignore_case, out, capacity, total, locate, pattern_counts, count_patterns);
  }
}
