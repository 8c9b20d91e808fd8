// The CPU twin of the CUDA peer copier (peer_copy.hpp): two host pools
// stand for two GPUs' pools, and each coalesced run is one memcpy.

#include "kernels/copy/peer_copy.hpp"
#include "kernels/copy/peer_plan.hpp"

#include <chrono>
#include <cstring>

namespace kvtier::copy {

namespace {

class host_peer_copier final : public peer_copier {
public:
  std::string name() const override { return "host"; }

  peer_result copy(const peer_request& request) override {
    peer_result result;
    const auto planning = std::chrono::steady_clock::now();
    if (auto problem = check_peer_request(request); !problem.empty())
      return result.ok = false, result.error = problem, result;
    const auto runs = peer_runs(request);
    const auto start = std::chrono::steady_clock::now();
    result.plan_seconds = std::chrono::duration<double>(start - planning).count();
    for (const auto& run : runs) {
      std::memcpy(request.to.base + run.to_offset, request.from.base + run.from_offset, run.bytes);
      result.bytes += run.bytes;
      ++result.runs;
      ++result.operations;
    }
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
  }
};

} // namespace

std::unique_ptr<peer_copier> make_host_peer_copier() {
  return std::make_unique<host_peer_copier>();
}

} // namespace kvtier::copy
