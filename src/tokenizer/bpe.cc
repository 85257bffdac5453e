#include "tokenizer/bpe.h"

#include <queue>

namespace radixlm::tokenizer {

void BpeMerges::Add(int32_t left, int32_t right, int32_t merged, int32_t rank) {
  auto [it, inserted] = map_.try_emplace(Key(left, right), Merge{rank, merged});
  if (!inserted && rank < it->second.rank) it->second = {rank, merged};
}

void BpeMerges::Apply(std::vector<int32_t>* symbols) const {
  std::vector<int32_t>& s = *symbols;
  const int n = static_cast<int>(s.size());
  if (n < 2) return;
  if (n <= 6) {
    // Short words (most of them): rescanning is cheaper than a heap.
    while (s.size() > 1) {
      int best = -1;
      const Merge* bm = nullptr;
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        const Merge* m = Find(s[i], s[i + 1]);
        if (m && (!bm || m->rank < bm->rank)) { bm = m; best = static_cast<int>(i); }
      }
      if (!bm) break;
      s[best] = bm->merged;
      s.erase(s.begin() + best + 1);
    }
    return;
  }
  // Doubly linked symbols; the heap holds candidate merges keyed by (rank, left position).
  std::vector<int> prev(n), next(n);
  std::vector<int32_t> sym = s;
  std::vector<char> alive(n, 1);
  for (int i = 0; i < n; ++i) { prev[i] = i - 1; next[i] = i + 1 < n ? i + 1 : -1; }
  struct Cand {
    int32_t rank;
    int pos;
    int32_t left, right;  // the symbols the candidate was made for (stale check)
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](int i) {
    if (i < 0 || next[i] < 0) return;
    if (const Merge* m = Find(sym[i], sym[next[i]])) heap.push({m->rank, i, sym[i], sym[next[i]]});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    const int i = c.pos;
    if (!alive[i] || next[i] < 0 || sym[i] != c.left || sym[next[i]] != c.right) continue;
    const int j = next[i];
    sym[i] = Find(c.left, c.right)->merged;
    alive[j] = 0;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    push(prev[i]);
    push(i);
  }
  s.clear();
  for (int i = 0; i >= 0; i = next[i]) s.push_back(sym[i]);
}

}  // namespace radixlm::tokenizer
