#include "cache/policy.hpp"

#include "cache/arc.hpp"
#include "cache/lfuda.hpp"
#include "cache/lru.hpp"
#include "cache/reuse_predictor.hpp"
#include "cache/s3fifo.hpp"
#include "cache/shared_predictor.hpp"

namespace kvtier::cache {

std::string_view name_of(policy_kind kind) {
  switch (kind) {
    case policy_kind::lru:
      return "lru";
    case policy_kind::arc:
      return "arc";
    case policy_kind::s3fifo:
      return "s3fifo";
    case policy_kind::lfuda:
      return "lfuda";
    case policy_kind::predictor:
      return "predictor";
    case policy_kind::shared_predictor:
      return "predictor-shared";
  }
  return "?";
}

std::unique_ptr<cache_policy> make_policy(policy_kind kind, uint64_t capacity) {
  switch (kind) {
    case policy_kind::lru:
      return std::make_unique<lru_policy>(capacity);
    case policy_kind::arc:
      return std::make_unique<arc_policy>(capacity);
    case policy_kind::s3fifo:
      return std::make_unique<s3fifo_policy>(capacity);
    case policy_kind::lfuda:
      return std::make_unique<lfuda_policy>(capacity);
    case policy_kind::predictor:
      return std::make_unique<reuse_predictor>(capacity);
    case policy_kind::shared_predictor:
      return std::move(make_shared_predictor_stack({capacity, 0, 0})[0]);
  }
  return nullptr;
}

} // namespace kvtier::cache
