#include "cache/optgen_policy.hpp"

#include "cache/keyed_list.hpp"

#include <algorithm>
#include <bit>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace kvtier::cache {
namespace {

// Occupancy counts over a ring of access times: range add, range max.
class occupancy_ring {
public:
  explicit occupancy_ring(uint64_t slots) : slots_(std::max<uint64_t>(slots, 1)) {
    leaves_ = std::bit_ceil(slots_);
    max_.assign(2 * leaves_, 0);
    add_.assign(2 * leaves_, 0);
  }
  uint64_t slots() const { return slots_; }
  /// Max over times [from, to), to - from <= slots().
  int32_t max(uint64_t from, uint64_t to) {
    int32_t m = 0;
    each_range(from, to, [&](uint64_t a, uint64_t b) { m = std::max(m, query(1, 0, leaves_, a, b)); });
    return m;
  }
  void add(uint64_t from, uint64_t to, int32_t v) {
    each_range(from, to, [&](uint64_t a, uint64_t b) { update(1, 0, leaves_, a, b, v); });
  }
  /// The slot of time t starts over (it held time t - slots()).
  void reset(uint64_t t) {
    uint64_t s = t % slots_;
    int32_t v = query(1, 0, leaves_, s, s + 1);
    if (v != 0)
      update(1, 0, leaves_, s, s + 1, -v);
  }

private:
  template <class F>
  void each_range(uint64_t from, uint64_t to, F f) {
    if (to <= from)
      return;
    uint64_t a = from % slots_, n = to - from;
    if (a + n <= slots_) {
      f(a, a + n);
    } else {
      f(a, slots_);
      f(0, a + n - slots_);
    }
  }
  int32_t query(size_t node, uint64_t lo, uint64_t hi, uint64_t a, uint64_t b) {
    if (b <= lo || hi <= a)
      return outside; // a slot's own count can be negative under its ancestors' adds
    if (a <= lo && hi <= b)
      return max_[node];
    uint64_t mid = (lo + hi) / 2;
    return add_[node] + std::max(query(2 * node, lo, mid, a, b), query(2 * node + 1, mid, hi, a, b));
  }
  void update(size_t node, uint64_t lo, uint64_t hi, uint64_t a, uint64_t b, int32_t v) {
    if (b <= lo || hi <= a)
      return;
    if (a <= lo && hi <= b) {
      max_[node] += v;
      add_[node] += v;
      return;
    }
    uint64_t mid = (lo + hi) / 2;
    update(2 * node, lo, mid, a, b, v);
    update(2 * node + 1, mid, hi, a, b, v);
    max_[node] = add_[node] + std::max(max_[2 * node], max_[2 * node + 1]);
  }
  static constexpr int32_t outside = INT32_MIN / 2;
  uint64_t slots_, leaves_;
  std::vector<int32_t> max_, add_; // max_[n] includes add_[n]
};

constexpr uint32_t depth_buckets = 8;

uint32_t feature_of(const block_context& c, uint32_t variant) {
  uint32_t uses = c.uses_before < 3 ? c.uses_before : c.uses_before < 8 ? 3 : 4;
  uint32_t cls = uses * 4 + (c.request_tail ? 2 : 0) + (c.extends_prefix ? 1 : 0);
  uint32_t depth = std::min<uint32_t>(std::bit_width(c.position), depth_buckets - 1);
  uint32_t turn = std::min<uint32_t>(c.turn, 3);
  uint32_t pace = c.turn == 0 ? 0 : std::min<uint32_t>((std::bit_width(c.requests_since_turn) + 1) / 2, 7);
  switch (variant & 15) {
    case 1:
      return cls;
    case 2:
      return (cls * 4 + turn) * 8 + pace;
    case 3:
      return ((cls * depth_buckets + depth) * 4 + turn) * 8 + pace;
    case 4:
      return (cls * 4 + turn) * 8;
    case 5:
      return cls * 8 + pace;
    case 6:
      return (cls * depth_buckets + depth) * 8 + pace;
    default:
      return cls * depth_buckets + depth;
  }
}
constexpr uint32_t features = 20 * depth_buckets * 4 * 8;

struct shared_state {
  struct access {
    uint64_t time;
    uint32_t feature;
  };
  struct pending {
    block_key key;
    uint64_t time;
    uint32_t position;
    bool has_previous;
    access previous;
  };

  optgen_params params;
  uint64_t capacity;
  occupancy_ring occupancy;
  std::unordered_map<block_key, access> last; // latest access within the history
  std::deque<std::pair<uint64_t, block_key>> fifo;
  std::vector<pending> request; // the current request's accesses, deepest first
  std::array<double, features> friendly{}, labelled{};
  struct judged {
    double rate;     // predicted friendly-rate at the block's last access
    double priority; // GreedyDual: the inflation then plus the rate
    uint64_t stamp;
  };
  std::unordered_map<block_key, judged> label; // resident blocks
  double inflation = 0;
  uint64_t clock = 0;
  uint64_t next_decay;
  block_key accessed = 0;

  shared_state(optgen_params p, uint64_t total)
      : params(p),
        capacity(std::max<uint64_t>(total, 1)),
        occupancy(capacity * std::max<uint32_t>(p.history, 1)),
        next_decay(decay_period()) {}

  uint64_t decay_period() const { return std::max<uint64_t>(occupancy.slots() / 8, 1); }

  double rate(uint32_t f) const { return (friendly[f] + 1) / (labelled[f] + 2); }
  void train(uint32_t f, bool is_friendly) {
    labelled[f] += 1;
    friendly[f] += is_friendly ? 1 : 0;
    all_labelled += 1;
    all_friendly += is_friendly ? 1 : 0;
  }
  double all_labelled = 0, all_friendly = 0;
  double threshold() const {
    if (params.variant & 32)
      return params.friendly_threshold * (all_friendly + 1) / (all_labelled + 2);
    return params.friendly_threshold;
  }

  void tick() {
    ++clock;
    occupancy.reset(clock);
    uint64_t w = occupancy.slots();
    while (!fifo.empty() && fifo.front().first + w <= clock) {
      auto [t, key] = fifo.front();
      fifo.pop_front();
      auto it = last.find(key);
      if (it != last.end() && it->second.time == t) {
        train(it->second.feature, false); // not used again within the history
        last.erase(it);
      }
    }
    if (clock >= next_decay) {
      for (uint32_t f = 0; f < features; ++f) {
        friendly[f] *= params.decay;
        labelled[f] *= params.decay;
      }
      all_friendly *= params.decay;
      all_labelled *= params.decay;
      next_decay = clock + decay_period();
    }
  }

  // Judges the buffered request's reuses in chain order.
  void flush() {
    bool prefix_kept = true;
    uint64_t w = occupancy.slots();
    for (auto p = request.rbegin(); p != request.rend(); ++p) {
      if (!p->has_previous) {
        prefix_kept = false;
        continue;
      }
      bool kept = prefix_kept && p->previous.time + w > clock &&
          static_cast<uint64_t>(occupancy.max(p->previous.time, p->time)) < capacity;
      if (kept)
        occupancy.add(p->previous.time, p->time, 1);
      train(p->previous.feature, kept);
      prefix_kept = kept;
    }
    request.clear();
  }

  // A request accessed `key`; returns how it is judged.
  judged observe(block_key key, const block_context& context) {
    if (!request.empty() && context.position + 1 != request.back().position)
      flush();
    tick();
    uint32_t f = feature_of(context, params.variant);
    pending p{key, clock, context.position, false, {}};
    if (auto it = last.find(key); it != last.end()) {
      p.has_previous = true;
      p.previous = it->second;
      it->second = access{clock, f};
    } else {
      last.emplace(key, access{clock, f});
    }
    fifo.emplace_back(clock, key);
    request.push_back(p);
    if (context.position == 0)
      flush();
    accessed = key;
    double r = rate(f);
    return label[key] = judged{r, inflation + r, clock};
  }
};

class optgen_tier final : public cache_policy {
public:
  optgen_tier(uint64_t capacity, std::shared_ptr<shared_state> state, bool top, bool bottom)
      : cache_policy(capacity), state_(std::move(state)), top_(top), bottom_(bottom) {}

  std::string_view name() const override { return "optgen"; }
  uint64_t size() const override { return here_.size(); }
  bool contains(block_key key) const override { return here_.count(key) > 0; }

  void on_hit(block_key key, const block_context& context) override {
    remove(key);
    place(key, state_->observe(key, context));
  }

  std::optional<block_key> insert(block_key key, const block_context& context) override {
    // A new block or a promotion into the top tier is a request access (a
    // promotion's was observed by the hit below); a block arriving lower
    // comes from above and keeps its judgement.
    auto& s = *state_;
    bool promoted = s.clock > 0 && s.accessed == key;
    shared_state::judged j{0, s.inflation, s.clock};
    if (top_ && !promoted) {
      j = s.observe(key, context);
    } else if (auto known = s.label.find(key); known != s.label.end()) {
      j = known->second;
    }
    std::optional<block_key> victim;
    if (size() >= capacity())
      victim = evict();
    place(key, j);
    return victim;
  }

  bool erase(block_key key) override { return remove(key); }

  std::optional<block_key> evict() override {
    block_key v;
    if (gd()) {
      if (order_.empty())
        return std::nullopt;
      auto [priority, stamp, key] = *order_.begin();
      v = key;
      if (bottom_)
        state_->inflation = std::max(state_->inflation, priority);
    } else {
      bool expired = (state_->params.variant & 64) && !friendly_.empty() &&
          here_.at(friendly_.back()).stamp + state_->occupancy.slots() <= state_->clock;
      auto& from = expired || averse_.empty() ? friendly_ : averse_;
      if (from.empty())
        return std::nullopt;
      v = from.back();
      if (&from == &friendly_ && (state_->params.variant & 128) && bottom_) {
        // Hawkeye's detraining: a friendly block the stack had to give up.
        if (auto it = state_->last.find(v); it != state_->last.end())
          state_->train(it->second.feature, false);
      }
    }
    remove(v);
    if (bottom_)
      state_->label.erase(v);
    return v;
  }

private:
  bool gd() const { return (state_->params.variant & 16) != 0; }
  void place(block_key key, const shared_state::judged& j) {
    here_[key] = j;
    if (gd())
      order_.insert({j.priority, j.stamp, key});
    else
      (j.rate >= state_->threshold() ? friendly_ : averse_).push_front(key);
  }
  bool remove(block_key key) {
    auto it = here_.find(key);
    if (it == here_.end())
      return false;
    order_.erase({it->second.priority, it->second.stamp, key});
    averse_.erase(key) || friendly_.erase(key);
    here_.erase(it);
    return true;
  }

  std::shared_ptr<shared_state> state_;
  bool top_, bottom_;
  std::unordered_map<block_key, shared_state::judged> here_;
  std::set<std::tuple<double, uint64_t, block_key>> order_;
  keyed_list averse_, friendly_;
};

} // namespace

std::array<std::unique_ptr<cache_policy>, 3> make_optgen_stack(std::array<uint64_t, 3> capacities,
                                                               optgen_params params) {
  uint64_t total = capacities[0] + capacities[1] + capacities[2];
  if (auto* e = std::getenv("OG_HISTORY"))
    params.history = std::atoi(e);
  if (auto* e = std::getenv("OG_DECAY"))
    params.decay = std::atof(e);
  if (auto* e = std::getenv("OG_THRESH"))
    params.friendly_threshold = std::atof(e);
  if (auto* e = std::getenv("OG_VARIANT"))
    params.variant = std::atoi(e);
  auto state = std::make_shared<shared_state>(params, total);
  size_t top = 3, bottom = 0;
  for (size_t t = 0; t < 3; ++t)
    if (capacities[t] > 0) {
      top = std::min(top, t);
      bottom = t;
    }
  std::array<std::unique_ptr<cache_policy>, 3> tiers;
  for (size_t t = 0; t < 3; ++t)
    if (capacities[t] > 0)
      tiers[t] = std::make_unique<optgen_tier>(capacities[t], state, t == top, t == bottom);
  return tiers;
}

} // namespace kvtier::cache
