#include "node/node_messages.hpp"

namespace kvtier::node {

void add_node_message_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<request>("kvtier_request");
  cfg.add_message_type<prefill_result>("kvtier_prefill_result");
  cfg.add_message_type<decode_result>("kvtier_decode_result");
  cfg.add_message_type<request_result>("kvtier_request_result");
  cfg.add_message_type<node_stats>("kvtier_node_stats");
  cfg.add_message_type<std::vector<uint32_t>>("kvtier_tokens");
}

} // namespace kvtier::node
