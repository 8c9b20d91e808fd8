#include "node/node_config.hpp"

#include "runtime/error.hpp"
#include "runtime/text_file.hpp"
#include "runtime/toml_reader.hpp"

#include <toml++/toml.h>

#include <charconv>
#include <set>

namespace kvtier::node {

namespace {

constexpr uint64_t kib = 1024, mib = kib * kib, gib = mib * kib;

// "127.0.0.1:7401" into host and port; the cluster runs on loopback only.
bool split_address(std::string_view text, std::string& host, uint16_t& port) {
  auto colon = text.rfind(':');
  if (colon == std::string_view::npos)
    return false;
  host = std::string(text.substr(0, colon));
  auto digits = text.substr(colon + 1);
  unsigned value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc{} || end != digits.data() + digits.size() || value == 0 || value > 65535)
    return false;
  port = static_cast<uint16_t>(value);
  return host == "127.0.0.1" || host == "localhost";
}

caf::error read_member(const toml::table& t, const std::string& file, size_t index, member_config& out) {
  toml_reader r(t, file, "member[" + std::to_string(index) + "]");
  r.read("name", out.name);
  std::string role;
  r.read_choice("role", role, {"prefill", "decode", "both"});
  std::string address;
  r.read("address", address);
  if (r.ok() && out.name.empty())
    r.fail("name", "expected the node's name");
  if (r.ok() && role.empty())
    r.fail("role", "expected \"prefill\", \"decode\" or \"both\"");
  if (r.ok())
    out.role = *role_of(role);
  if (r.ok() && !split_address(address, out.host, out.port))
    r.fail("address", "expected a loopback address with a port, such as \"127.0.0.1:7401\", got \"" + address + "\"");
  return r.finish({"name", "role", "address"});
}

} // namespace

std::string_view to_string(node_role role) {
  switch (role) {
    case node_role::prefill:
      return "prefill";
    case node_role::decode:
      return "decode";
    case node_role::both:
      return "both";
    case node_role::router:
      return "router";
  }
  return "?";
}

std::optional<node_role> role_of(std::string_view name) {
  for (auto r : {node_role::prefill, node_role::decode, node_role::both, node_role::router})
    if (to_string(r) == name)
      return r;
  return std::nullopt;
}

caf::expected<std::optional<node_config>> parse_node_config(std::string_view text, const std::string& file,
                                                            std::string_view role_flag) {
  auto doc = parse_toml(text, file);
  if (!doc)
    return doc.error();
  const auto* table = (*doc)["node"].as_table();
  if (!table && role_flag.empty())
    return std::optional<node_config>{};
  node_config c;
  std::string role;
  toml::table empty;
  toml_reader r(table ? *table : empty, file, "node");
  r.read_choice("role", role, {"prefill", "decode", "both", "router"});
  if (!role_flag.empty()) {
    auto flagged = role_of(role_flag);
    if (!flagged)
      return make_error(errc::invalid_argument,
                        "--role: expected prefill, decode, both or router, got \"" + std::string(role_flag) + "\"");
    role = std::string(role_flag);
  }
  if (r.ok() && role.empty())
    r.fail("role", "expected the node's role: \"prefill\", \"decode\", \"both\" or \"router\" (or kvtierd --role)");
  if (r.ok())
    c.role = *role_of(role);
  r.read("name", c.name);
  std::string listen = "127.0.0.1:0";
  r.read("listen", listen);
  if (r.ok() && listen != "127.0.0.1:0" && !split_address(listen, c.host, c.port))
    r.fail("listen", "expected a loopback address with a port, such as \"127.0.0.1:7401\", got \"" + listen + "\"");
  r.read("block_tokens", c.block_tokens, 1, 1u << 16);
  r.read_bytes("block_bytes", c.block_bytes, 4 * kib, 64 * mib);
  r.read("dram_blocks", c.dram_blocks, 4, 1u << 24);
  r.read("prefill_tokens_per_s", c.prefill_tokens_per_s, 0.0, 1e9);
  r.read("decode_step_us", c.decode_step_us, 0, 60'000'000);
  std::string redis = "127.0.0.1:6379";
  r.read("redis", redis);
  if (r.ok() && !split_address(redis, c.redis_host, c.redis_port))
    r.fail("redis", "expected the remote store's loopback address, such as \"127.0.0.1:6379\", got \"" + redis + "\"");
  r.read("key_prefix", c.key_prefix);
  r.read("heartbeat_ms", c.heartbeat_ms, 10, 60'000);
  r.read("connection_timeout_ms", c.connection_timeout_ms, 250, 600'000); // clients heartbeat every 100 ms
  if (r.ok() && c.connection_timeout_ms <= c.heartbeat_ms)
    r.fail("connection_timeout_ms",
           "expected more than heartbeat_ms (" + std::to_string(c.heartbeat_ms) +
               "): a peer is silent for a while before it counts as gone");
  if (r.ok() && uint64_t{c.dram_blocks} * c.block_bytes > 64 * gib)
    r.fail("dram_blocks", "expected dram_blocks × block_bytes of at most 64 GiB");
  if (auto e = r.finish({"role", "name", "listen", "block_tokens", "block_bytes", "dram_blocks", "prefill_tokens_per_s",
                         "decode_step_us", "redis", "key_prefix", "heartbeat_ms", "connection_timeout_ms"}))
    return e;
  if (c.name.empty())
    c.name = std::string(to_string(c.role)) + "@" + std::to_string(c.port);

  toml_reader top(*doc, file, "");
  top.mark_known("node");
  if (const auto* node = doc->get("member")) {
    top.mark_known("member");
    const auto* arr = node->as_array();
    if (!arr)
      return make_error(errc::invalid_config,
                        top.where(node->source()) + ": member: expected [[member]] tables, one per node");
    std::set<std::string> names;
    for (size_t i = 0; i < arr->size(); ++i) {
      const auto* t = (*arr)[i].as_table();
      if (!t)
        return make_error(errc::invalid_config, top.where((*arr)[i].source()) + ": member: expected a table");
      member_config m;
      if (auto e = read_member(*t, file, i, m))
        return e;
      if (!names.insert(m.name).second)
        return make_error(errc::invalid_config,
                          top.where(t->source()) + ": [[member]] name: \"" + m.name + "\" is configured twice");
      c.members.push_back(std::move(m));
    }
  }
  if (auto e = top.finish({"node", "member"}))
    return e;
  if (c.role == node_role::router && c.members.empty())
    return make_error(errc::invalid_config, file + ": a router expects at least one [[member]] (name, role, address)");
  if (c.role != node_role::router && !c.members.empty())
    return make_error(errc::invalid_config,
                      file + ": [[member]]: only a router lists nodes (this node's role is " +
                          std::string(to_string(c.role)) + ")");
  return std::optional<node_config>{std::move(c)};
}

caf::expected<std::optional<node_config>> read_node_config(const std::string& path, std::string_view role_flag) {
  auto text = read_text_file(path, "node config");
  if (!text)
    return text.error();
  return parse_node_config(*text, path, role_flag);
}

} // namespace kvtier::node
