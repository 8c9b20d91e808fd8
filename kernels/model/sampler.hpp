#pragma once
// The next token from a position's logits: greedy (temperature 0: the
// largest logit, the lowest id among equals) or temperature sampling seeded
// by (seed, sequence, position), so a sequence samples the same tokens
// whatever batch or tier its blocks were in.

#include <cstdint>
#include <span>

namespace kvtier::model {

struct sampling {
  double temperature = 0;
  uint64_t seed = 0;
};

uint32_t sample_token(std::span<const float> logits, const sampling& how, uint64_t sequence, uint64_t position);

} // namespace kvtier::model
