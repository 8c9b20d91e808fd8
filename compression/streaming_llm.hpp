#pragma once
// StreamingLLM (Xiao et al. 2023): the first `sinks` tokens (attention sinks)
// plus a rolling window of the most recent tokens; the window is whatever the
// budget leaves after the sinks. Sliding window: the same without sinks.
// Both ignore attention: the score is the token's position.

#include "compression/policy.hpp"

namespace kvtier::compression {

class streaming_llm final : public policy {
public:
  explicit streaming_llm(uint32_t sinks) : sinks_(sinks) {}
  std::string name() const override { return "streaming_llm"; }
  std::vector<float> score(const observed_attention& observed) const override;
  protection protect() const override { return {sinks_, 0}; }

private:
  uint32_t sinks_;
};

class sliding_window final : public policy {
public:
  std::string name() const override { return "sliding_window"; }
  std::vector<float> score(const observed_attention& observed) const override;
};

} // namespace kvtier::compression
