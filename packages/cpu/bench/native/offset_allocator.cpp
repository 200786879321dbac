// A native peer for the cpu benchmark: a small allocator in the style of
// Sebastian Aaltonen's OffsetAllocator (written here from its design, not its
// code): 256 size bins on a float-like scale (5-bit exponent, 3-bit
// mantissa), a two-level bitmap of non-empty bins, and block records kept in
// one array of nodes with a stack of unused node indices. Sizes and offsets
// are in units of 64 bytes, the granule of allot's CpuHeap.
//
// Usage: offset_allocator <trace file> <repetitions>
// The trace file holds int32 n, then n records of (int32 kind, int32 slot,
// int32 byteLength). Prints "<best seconds> <footprint bytes>": the
// footprint of a first replay on a fresh allocator, then the best CPU time of
// `repetitions` replays on that same (warm) allocator.
#include <algorithm>
#include <ctime>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr uint32_t kMantissaBits = 3;
constexpr uint32_t kMantissaValue = 1u << kMantissaBits;
constexpr uint32_t kMantissaMask = kMantissaValue - 1;
constexpr uint32_t kBins = 256;
constexpr uint32_t kNone = 0xffffffffu;

uint32_t highBit(uint32_t x) { return 31 - __builtin_clz(x); }
uint32_t lowBitFrom(uint32_t mask, uint32_t from) {
  uint32_t m = from >= 32 ? 0 : mask & (~0u << from);
  return m ? __builtin_ctz(m) : kNone;
}

// Bin of the smallest class whose every block holds `size` units.
uint32_t binRoundUp(uint32_t size) {
  if (size < kMantissaValue) return size;
  uint32_t exp = highBit(size) - kMantissaBits;
  uint32_t mantissa = size >> exp;
  uint32_t low = size & ((1u << exp) - 1);
  uint32_t bin = ((exp + 1) << kMantissaBits) + (mantissa & kMantissaMask);
  return low ? bin + 1 : bin;
}

// Bin a free block of `size` units is filed in.
uint32_t binRoundDown(uint32_t size) {
  if (size < kMantissaValue) return size;
  uint32_t exp = highBit(size) - kMantissaBits;
  uint32_t mantissa = size >> exp;
  return ((exp + 1) << kMantissaBits) + (mantissa & kMantissaMask);
}

struct Node {
  uint32_t offset, size;
  uint32_t binPrev, binNext;
  uint32_t left, right;
  bool used;
};

class Allocator {
 public:
  explicit Allocator(uint32_t units, uint32_t maxNodes)
      : nodes_(maxNodes), spare_(maxNodes) {
    for (uint32_t i = 0; i < maxNodes; i++) spare_[i] = maxNodes - 1 - i;
    for (auto& h : heads_) h = kNone;
    insert(units, 0, kNone, kNone);
  }

  uint32_t alloc(uint32_t size) {
    uint32_t want = binRoundUp(size);
    uint32_t top = want >> 3;
    uint32_t bin = kNone;
    if (topBits_ & (1u << top)) {
      uint32_t leaf = lowBitFrom(leafBits_[top], want & 7);
      if (leaf != kNone) bin = (top << 3) | leaf;
    }
    if (bin == kNone) {
      uint32_t t = lowBitFrom(topBits_, top + 1);
      if (t == kNone) return kNone;
      bin = (t << 3) | __builtin_ctz(leafBits_[t]);
    }
    uint32_t n = heads_[bin];
    unlink(n, bin);
    Node& node = nodes_[n];
    uint32_t rest = node.size - size;
    node.size = size;
    node.used = true;
    if (rest > 0) {
      uint32_t r = insert(rest, node.offset + size, n, node.right);
      if (node.right != kNone) nodes_[node.right].left = r;
      node.right = r;
    }
    return n;
  }

  void free(uint32_t n) {
    Node& node = nodes_[n];
    uint32_t offset = node.offset, size = node.size;
    uint32_t left = node.left, right = node.right;
    if (left != kNone && !nodes_[left].used) {
      Node& l = nodes_[left];
      offset = l.offset;
      size += l.size;
      unlink(left, binRoundDown(l.size));
      left = l.left;
      spare_.push_back(node.left);
    }
    if (right != kNone && !nodes_[right].used) {
      Node& r = nodes_[right];
      size += r.size;
      unlink(right, binRoundDown(r.size));
      right = r.right;
      spare_.push_back(node.right);
    }
    spare_.push_back(n);
    uint32_t m = insert(size, offset, left, right);
    if (left != kNone) nodes_[left].right = m;
    if (right != kNone) nodes_[right].left = m;
  }

  const Node& node(uint32_t n) const { return nodes_[n]; }

 private:
  uint32_t insert(uint32_t size, uint32_t offset, uint32_t left,
                  uint32_t right) {
    uint32_t bin = binRoundDown(size);
    uint32_t n = spare_.back();
    spare_.pop_back();
    Node& node = nodes_[n];
    node = Node{offset, size, kNone, heads_[bin], left, right, false};
    if (heads_[bin] != kNone) nodes_[heads_[bin]].binPrev = n;
    heads_[bin] = n;
    topBits_ |= 1u << (bin >> 3);
    leafBits_[bin >> 3] |= 1u << (bin & 7);
    return n;
  }

  void unlink(uint32_t n, uint32_t bin) {
    Node& node = nodes_[n];
    if (node.binPrev != kNone) nodes_[node.binPrev].binNext = node.binNext;
    else heads_[bin] = node.binNext;
    if (node.binNext != kNone) nodes_[node.binNext].binPrev = node.binPrev;
    if (heads_[bin] == kNone) {
      leafBits_[bin >> 3] &= ~(1u << (bin & 7));
      if (!leafBits_[bin >> 3]) topBits_ &= ~(1u << (bin >> 3));
    }
  }

  std::vector<Node> nodes_;
  std::vector<uint32_t> spare_;
  uint32_t heads_[kBins];
  uint32_t topBits_ = 0;
  uint8_t leafBits_[32] = {};
};

// CPU seconds of this process, as the JavaScript rows measure (steadier than
// wall time on a shared machine).
double cpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  FILE* f = std::fopen(argv[1], "rb");
  if (!f) return 2;
  int32_t n = 0;
  if (std::fread(&n, 4, 1, f) != 1) return 2;
  std::vector<int32_t> ops(3 * static_cast<size_t>(n));
  if (std::fread(ops.data(), 4, ops.size(), f) != ops.size()) return 2;
  std::fclose(f);
  int reps = std::atoi(argv[2]);
  int32_t slots = 0;
  for (int32_t i = 0; i < n; i++) slots = std::max(slots, ops[3 * i + 1] + 1);
  std::vector<uint32_t> live(slots);
  Allocator heap(1u << 24, 1u << 20);  // 1 GiB of 64-byte units
  // Footprint: the first replay, on the fresh allocator, tracks the
  // highest byte used. The timed replays that follow reuse it (warm).
  uint64_t footprint = 0;
  for (int32_t i = 0; i < n; i++) {
    const int32_t* op = &ops[3 * i];
    if (op[0] == 1) {
      uint32_t units = op[2] == 0 ? 1 : (op[2] + 63) >> 6;
      uint32_t id = heap.alloc(units);
      if (id == kNone) return 3;
      live[op[1]] = id;
      uint64_t end = (uint64_t(heap.node(id).offset) << 6) + op[2];
      if (end > footprint) footprint = end;
    } else {
      heap.free(live[op[1]]);
    }
  }
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    double t0 = cpuSeconds();
    for (int32_t i = 0; i < n; i++) {
      const int32_t* op = &ops[3 * i];
      if (op[0] == 1) {
        uint32_t units = op[2] == 0 ? 1 : (op[2] + 63) >> 6;
        uint32_t id = heap.alloc(units);
        if (id == kNone) return 3;
        live[op[1]] = id;
      } else {
        heap.free(live[op[1]]);
      }
    }
    double s = cpuSeconds() - t0;
    if (s < best) best = s;
  }
  std::printf("%.9f %llu\n", best, static_cast<unsigned long long>(footprint));
  return 0;
}
