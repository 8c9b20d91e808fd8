// The cluster node's config: roles, addresses and members read, mistakes
// located.

#include "node/node_config.hpp"

#include "runtime/error.hpp"

#include <gtest/gtest.h>

using namespace kvtier;
using namespace kvtier::node;

namespace {

std::string error_of(std::string_view text, std::string_view role = "") {
  auto c = parse_node_config(text, "n.toml", role);
  return c ? std::string("no error") : describe(c.error());
}

TEST(node_config, a_file_without_node_table_is_a_block_store_config) {
  auto c = parse_node_config("[daemon]\nsocket = \"/tmp/x\"\n", "d.toml", "");
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->has_value());
}

TEST(node_config, reads_a_router_and_its_members) {
  auto c = parse_node_config(R"([node]
role = "router"
listen = "127.0.0.1:7400"
[[member]]
name = "a"
role = "prefill"
address = "127.0.0.1:7401"
[[member]]
name = "b"
role = "decode"
address = "localhost:7402"
)",
                             "r.toml", "");
  ASSERT_TRUE(c) << describe(c.error());
  ASSERT_TRUE(c->has_value());
  const auto& n = **c;
  EXPECT_EQ(n.role, node_role::router);
  EXPECT_EQ(n.port, 7400);
  ASSERT_EQ(n.members.size(), 2u);
  EXPECT_EQ(n.members[0].name, "a");
  EXPECT_EQ(n.members[0].role, node_role::prefill);
  EXPECT_EQ(n.members[1].port, 7402);
  EXPECT_EQ(n.members[1].role, node_role::decode);
}

TEST(node_config, role_flag_overrides_the_file) {
  auto c = parse_node_config("[node]\nrole = \"prefill\"\nblock_tokens = 32\n", "n.toml", "decode");
  ASSERT_TRUE(c && c->has_value());
  EXPECT_EQ((**c).role, node_role::decode);
  EXPECT_EQ((**c).block_tokens, 32u);
  EXPECT_EQ(error_of("[node]\nrole = \"prefill\"\n", "leader"),
            "--role: expected prefill, decode, both or router, got \"leader\"");
}

TEST(node_config, mistakes_are_located) {
  EXPECT_EQ(error_of("[node]\nname = \"x\"\n"),
            "n.toml:1:1: [node] role: expected the node's role: \"prefill\", \"decode\", \"both\" or "
            "\"router\" (or kvtierd --role)");
  EXPECT_NE(error_of("[node]\nrole = \"decode\"\nlisten = \"10.0.0.1:7400\"\n")
                .find("n.toml:3:10: [node] listen: expected a loopback address"),
            std::string::npos)
      << error_of("[node]\nrole = \"decode\"\nlisten = \"10.0.0.1:7400\"\n");
  EXPECT_EQ(error_of("[node]\nrole = \"router\"\n"),
            "n.toml: a router expects at least one [[member]] (name, role, address)");
  EXPECT_EQ(
      error_of("[node]\nrole = \"decode\"\n[[member]]\nname = \"a\"\nrole = \"decode\"\naddress = \"127.0.0.1:1\"\n"),
      "n.toml: [[member]]: only a router lists nodes (this node's role is decode)");
  EXPECT_NE(error_of("[node]\nrole = \"decode\"\nheartbeat_ms = 500\nconnection_timeout_ms = 400\n")
                .find("connection_timeout_ms: expected more than heartbeat_ms (500)"),
            std::string::npos);
}

} // namespace
