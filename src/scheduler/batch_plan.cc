#include "scheduler/batch_plan.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

namespace radixlm::scheduler {
namespace {

// The compact prefix tree: node 0 is the root (depth 0). A node's tokens are positions
// [depth(parent), depth) of any prompt below it.
struct Tree {
  struct Node {
    int64_t depth = 0;
    int32_t parent = -1;
    std::vector<int32_t> children;
    std::vector<int64_t> ends;  // prompts that end exactly here (duplicates, prompts that others extend)
    int64_t n = 0;              // prompts in the subtree
  };
  std::vector<Node> nodes;
  int64_t tok(int32_t v) const { return nodes[v].depth - (v == 0 ? 0 : nodes[nodes[v].parent].depth); }
};

// Built from the prompts in lexicographic order: each prompt leaves the path of the previous
// one at their common prefix (splitting an edge there if needed). O(total tokens + sort).
Tree BuildTree(std::span<const std::vector<int32_t>> prompts) {
  std::vector<int64_t> order(prompts.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return std::lexicographical_compare(prompts[a].begin(), prompts[a].end(), prompts[b].begin(), prompts[b].end());
  });
  Tree t;
  t.nodes.emplace_back();
  std::vector<int32_t> stack = {0};
  const std::vector<int32_t>* prev = nullptr;
  for (int64_t i : order) {
    const std::vector<int32_t>& p = prompts[i];
    int64_t l = 0;
    if (prev != nullptr)
      while (l < static_cast<int64_t>(std::min(prev->size(), p.size())) && (*prev)[l] == p[l]) ++l;
    int32_t last = -1;
    while (t.nodes[stack.back()].depth > l) {
      last = stack.back();
      stack.pop_back();
    }
    if (t.nodes[stack.back()].depth < l) {  // split the edge to `last` at depth l
      const int32_t top = stack.back(), mid = static_cast<int32_t>(t.nodes.size());
      t.nodes.push_back({l, top, {last}, {}, 0});
      std::replace(t.nodes[top].children.begin(), t.nodes[top].children.end(), last, mid);
      t.nodes[last].parent = mid;
      stack.push_back(mid);
    }
    if (static_cast<int64_t>(p.size()) == l) {
      t.nodes[stack.back()].ends.push_back(i);
    } else {
      const int32_t leaf = static_cast<int32_t>(t.nodes.size());
      t.nodes.push_back({static_cast<int64_t>(p.size()), stack.back(), {}, {i}, 0});
      t.nodes[stack.back()].children.push_back(leaf);
      stack.push_back(leaf);
    }
    prev = &p;
  }
  // Subtree counts, children before parents (every child has a larger index than... not
  // always after splits, so by explicit post-order).
  std::vector<int32_t> post, todo = {0};
  while (!todo.empty()) {
    const int32_t v = todo.back();
    todo.pop_back();
    post.push_back(v);
    for (int32_t c : t.nodes[v].children) todo.push_back(c);
  }
  for (auto it = post.rbegin(); it != post.rend(); ++it) {
    Tree::Node& v = t.nodes[*it];
    v.n = static_cast<int64_t>(v.ends.size());
    for (int32_t c : v.children) v.n += t.nodes[c].n;
  }
  return t;
}

void SubtreePrompts(const Tree& t, int32_t v, std::vector<int64_t>* out) {
  std::vector<int32_t> todo = {v};
  while (!todo.empty()) {
    const int32_t x = todo.back();
    todo.pop_back();
    out->insert(out->end(), t.nodes[x].ends.begin(), t.nodes[x].ends.end());
    for (int32_t c : t.nodes[x].children) todo.push_back(c);
  }
}

// BatchLLM Algorithm 1 (MaximizeReuse), faithfully: C's sub-problem first, then each child G of
// C is lifted under D (forking C's tokens into it) when (prompts(G) - 1) * tok(G) > tok(C); a
// childless, prompt-less C is deleted and a single-child one merged (the tree stays compact).
void MaximizeReuse(Tree& t, int32_t d) {
  const std::vector<int32_t> snapshot = t.nodes[d].children;
  for (int32_t c : snapshot) {
    MaximizeReuse(t, c);
    const std::vector<int32_t> grandchildren = t.nodes[c].children;
    for (int32_t g : grandchildren) {
      const int64_t gain = (t.nodes[g].n - 1) * t.tok(g), penalty = t.tok(c);
      if (gain <= penalty) continue;
      auto& cc = t.nodes[c].children;
      cc.erase(std::find(cc.begin(), cc.end(), g));
      t.nodes[c].n -= t.nodes[g].n;
      t.nodes[g].parent = d;  // G now holds C's tokens and its own: depth(G) - depth(D)
      t.nodes[d].children.push_back(g);
    }
    Tree::Node& cn = t.nodes[c];
    auto& dc = t.nodes[d].children;
    if (cn.ends.empty() && cn.children.empty()) {
      dc.erase(std::find(dc.begin(), dc.end(), c));
    } else if (cn.ends.empty() && cn.children.size() == 1) {
      const int32_t only = cn.children[0];
      t.nodes[only].parent = d;
      *std::find(dc.begin(), dc.end(), c) = only;
      cn.children.clear();
    }
  }
}

struct Grouped {
  std::vector<PrefixGroup> groups;  // prefix = the chosen node's depth (uncapped)
  int64_t saving = 0;               // sum of (members - 1) * prefix
};

Grouped GroupPaper(Tree t) {
  MaximizeReuse(t, 0);
  Grouped out;
  for (int64_t i : t.nodes[0].ends) out.groups.push_back({0, {i}});
  for (int32_t c : t.nodes[0].children) {
    PrefixGroup g;
    g.prefix_tokens = t.nodes[c].depth;
    SubtreePrompts(t, c, &g.members);
    out.saving += (static_cast<int64_t>(g.members.size()) - 1) * g.prefix_tokens;
    out.groups.push_back(std::move(g));
  }
  return out;
}

// The exact optimum: g(v, j) = the best saving inside v's subtree when the nearest chosen group
// node above v is its ancestor at level j (0: none, depth 0). Either v is not chosen (its
// ending prompts join that group: term * depth_j) or it is (-D(v) for its prefix computed once,
// + term * D(v), children see v as the nearest). Bottom-up over levels, then read top-down.
Grouped GroupExact(const Tree& t) {
  const int32_t n = static_cast<int32_t>(t.nodes.size());
  std::vector<int32_t> level(n, 0), pre;  // pre-order
  std::vector<int32_t> todo = {0};
  while (!todo.empty()) {
    const int32_t v = todo.back();
    todo.pop_back();
    pre.push_back(v);
    for (int32_t c : t.nodes[v].children) {
      level[c] = level[v] + 1;
      todo.push_back(c);
    }
  }
  // best[v][j], j < level(v); chosen[v][j]: choosing v is strictly better.
  std::vector<std::vector<int64_t>> best(n);
  std::vector<std::vector<uint8_t>> chosen(n);
  std::vector<int64_t> path;  // depths of v's ancestors by level (path[0] = 0: none)
  for (auto it = pre.rbegin(); it != pre.rend(); ++it) {
    const int32_t v = *it;
    if (v == 0) continue;
    const int k = level[v];
    path.assign(k, 0);
    for (int32_t a = t.nodes[v].parent; a != 0; a = t.nodes[a].parent) path[level[a]] = t.nodes[a].depth;
    const int64_t term = static_cast<int64_t>(t.nodes[v].ends.size()), dv = t.nodes[v].depth;
    int64_t take = -dv + term * dv;
    for (int32_t c : t.nodes[v].children) take += best[c][k];
    best[v].resize(k);
    chosen[v].resize(k);
    for (int j = 0; j < k; ++j) {
      int64_t skip = term * path[j];
      for (int32_t c : t.nodes[v].children) skip += best[c][j];
      chosen[v][j] = take > skip;
      best[v][j] = std::max(take, skip);
    }
    for (int32_t c : t.nodes[v].children) std::vector<int64_t>().swap(best[c]);  // only v's row is needed above
  }
  Grouped out;
  for (int64_t i : t.nodes[0].ends) out.groups.push_back({0, {i}});
  for (int32_t c : t.nodes[0].children) out.saving += best[c][0];
  // Top-down: (node, level index of its nearest chosen ancestor, that ancestor's group).
  struct Item {
    int32_t v;
    int j;
    int64_t group;
  };
  std::vector<Item> stack;
  for (int32_t c : t.nodes[0].children) stack.push_back({c, 0, -1});
  while (!stack.empty()) {
    const Item it = stack.back();
    stack.pop_back();
    int j = it.j;
    int64_t group = it.group;
    if (chosen[it.v][it.j]) {
      j = level[it.v];
      group = static_cast<int64_t>(out.groups.size());
      out.groups.push_back({t.nodes[it.v].depth, {}});
    }
    for (int64_t i : t.nodes[it.v].ends) {
      if (group < 0) out.groups.push_back({0, {i}});
      else out.groups[group].members.push_back(i);
    }
    for (int32_t c : t.nodes[it.v].children) stack.push_back({c, j, group});
  }
  return out;
}

Grouped GroupNone(size_t n) {
  Grouped out;
  for (size_t i = 0; i < n; ++i) out.groups.push_back({0, {static_cast<int64_t>(i)}});
  return out;
}

Grouped Group(std::span<const std::vector<int32_t>> prompts, Grouping grouping, const Tree& tree) {
  switch (grouping) {
    case Grouping::kNone: return GroupNone(prompts.size());
    case Grouping::kPaper: return GroupPaper(tree);
    case Grouping::kExact: break;
  }
  return GroupExact(tree);
}

}  // namespace

BatchPlan PlanBatch(std::span<const std::vector<int32_t>> prompts, Grouping grouping, GroupOrder order) {
  const Tree tree = BuildTree(prompts);
  Grouped grouped = Group(prompts, grouping, tree);
  BatchPlan plan;
  for (PrefixGroup& g : grouped.groups) {
    if (g.members.empty()) continue;
    std::sort(g.members.begin(), g.members.end());
    // A member keeps at least one token of its own (its first logits come from it).
    int64_t shortest = INT64_MAX;
    for (int64_t m : g.members) shortest = std::min<int64_t>(shortest, static_cast<int64_t>(prompts[m].size()));
    g.prefix_tokens = g.members.size() < 2 ? 0 : std::max<int64_t>(0, std::min(g.prefix_tokens, shortest - 1));
    if (g.prefix_tokens == 0 && g.members.size() > 1) {  // nothing shared after the cap: members alone
      for (int64_t m : g.members) plan.groups.push_back({0, {m}});
      continue;
    }
    plan.groups.push_back(std::move(g));
  }
  BatchPlanStats& s = plan.stats;
  s.prompts = static_cast<int64_t>(prompts.size());
  for (const auto& p : prompts) s.prompt_tokens += static_cast<int64_t>(p.size());
  std::vector<int64_t> total(plan.groups.size());
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    const PrefixGroup& g = plan.groups[i];
    total[i] = g.prefix_tokens;
    for (int64_t m : g.members) total[i] += static_cast<int64_t>(prompts[m].size()) - g.prefix_tokens;
    s.planned_tokens += total[i];
    s.shared_groups += g.members.size() > 1;
  }
  s.groups = static_cast<int64_t>(plan.groups.size());
  for (size_t v = 1; v < tree.nodes.size(); ++v) s.ideal_tokens += tree.tok(static_cast<int32_t>(v));
  std::vector<size_t> idx(plan.groups.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    if (order == GroupOrder::kPrefill && total[a] != total[b]) return total[a] < total[b];
    return plan.groups[a].members[0] < plan.groups[b].members[0];
  });
  std::vector<PrefixGroup> ordered;
  for (size_t i : idx) ordered.push_back(std::move(plan.groups[i]));
  plan.groups = std::move(ordered);
  return plan;
}

int64_t GroupingSaving(std::span<const std::vector<int32_t>> prompts, Grouping grouping) {
  return Group(prompts, grouping, BuildTree(prompts)).saving;
}

int64_t GroupCost(const PrefixGroup& g, std::span<const std::vector<int32_t>> prompts, std::span<const int64_t> generate) {
  int64_t cost = g.prefix_tokens;
  for (int64_t m : g.members) cost += static_cast<int64_t>(prompts[m].size()) - g.prefix_tokens + generate[m];
  return cost;
}

BatchPlan SplitLargeGroups(const BatchPlan& plan, std::span<const std::vector<int32_t>> prompts,
                           std::span<const int64_t> generate, int workers) {
  if (workers <= 1) return plan;
  int64_t total = 0;
  for (const PrefixGroup& g : plan.groups) total += GroupCost(g, prompts, generate);
  const double share = static_cast<double>(total) / workers;
  BatchPlan out;
  out.stats = plan.stats;
  out.stats.planned_tokens = 0;
  out.stats.groups = out.stats.shared_groups = 0;
  for (const PrefixGroup& g : plan.groups) {
    const int64_t cost = GroupCost(g, prompts, generate);
    const int64_t n = static_cast<int64_t>(g.members.size());
    const int64_t pieces = std::min<int64_t>(n, std::max<int64_t>(1, static_cast<int64_t>(std::ceil(cost / share - 1e-9))));
    for (int64_t k = 0; k < pieces; ++k) {
      PrefixGroup piece;
      piece.members.assign(g.members.begin() + k * n / pieces, g.members.begin() + (k + 1) * n / pieces);
      piece.prefix_tokens = piece.members.size() > 1 ? g.prefix_tokens : 0;
      out.stats.planned_tokens += piece.prefix_tokens;
      for (int64_t m : piece.members) out.stats.planned_tokens += static_cast<int64_t>(prompts[m].size()) - piece.prefix_tokens;
      ++out.stats.groups;
      out.stats.shared_groups += piece.members.size() > 1;
      out.groups.push_back(std::move(piece));
    }
  }
  return out;
}

std::vector<int> ShardGroups(const BatchPlan& plan, std::span<const std::vector<int32_t>> prompts,
                             std::span<const int64_t> generate, int workers) {
  std::vector<int> worker(plan.groups.size(), 0);
  if (workers <= 1) return worker;
  std::vector<int64_t> cost(plan.groups.size());
  for (size_t i = 0; i < cost.size(); ++i) cost[i] = GroupCost(plan.groups[i], prompts, generate);
  std::vector<size_t> idx(cost.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return cost[a] > cost[b]; });
  std::vector<int64_t> load(workers, 0);
  for (size_t i : idx) {
    const int w = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    worker[i] = w;
    load[w] += cost[i];
  }
  return worker;
}

double ShardImbalance(const BatchPlan& plan, std::span<const std::vector<int32_t>> prompts,
                      std::span<const int64_t> generate, int workers) {
  const std::vector<int> w = ShardGroups(plan, prompts, generate, workers);
  std::vector<int64_t> load(std::max(workers, 1), 0);
  int64_t sum = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const int64_t c = GroupCost(plan.groups[i], prompts, generate);
    load[w[i]] += c;
    sum += c;
  }
  if (sum == 0) return 1.0;
  return static_cast<double>(*std::max_element(load.begin(), load.end())) / (static_cast<double>(sum) / load.size());
}

}  // namespace radixlm::scheduler
