#include "kernels/model/llama_config.hpp"

namespace kvtier::model {

std::string llama_config::problem() const {
  if (vocab == 0 || hidden == 0 || intermediate == 0 || layers == 0 || q_heads == 0 || kv_heads == 0 || head_dim == 0)
    return "every size (vocab, hidden, intermediate, layers, heads, head_dim) must be positive";
  if (q_heads % kv_heads != 0)
    return "query heads must be a multiple of KV heads";
  if (head_dim % 2 != 0)
    return "head_dim must be even (RoPE rotates pairs)";
  if (!(rms_eps > 0) || !(rope_theta > 1))
    return "rms_eps must be positive and rope_theta above 1";
  if (scaling.enabled &&
      !(scaling.factor >= 1 && scaling.high_freq_factor > scaling.low_freq_factor && scaling.low_freq_factor > 0 &&
        scaling.original_max_positions > 0))
    return "Llama-3 RoPE scaling needs factor >= 1 and high_freq_factor > low_freq_factor > 0";
  return {};
}

} // namespace kvtier::model
