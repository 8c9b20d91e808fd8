#include "daemon/daemon_config.hpp"

#include "runtime/error.hpp"
#include "runtime/text_file.hpp"
#include "runtime/toml_reader.hpp"

#include <toml++/toml.h>

#include <set>

namespace kvtier::daemon {

namespace {

constexpr std::uint64_t kib = 1024, mib = kib * kib, gib = mib * kib, tib = gib * kib;

caf::error read_tenant(const toml::table& t, const std::string& file, std::size_t index, tenant_config& out) {
  toml_reader r(t, file, "tenant[" + std::to_string(index) + "]");
  r.read("name", out.name);
  r.read("token", out.token);
  r.read("share", out.share);
  r.read("quota_blocks", out.quota_blocks, 0, std::uint64_t{1} << 40);
  if (r.ok() && (out.name.empty() || out.name.size() > 255))
    r.fail("name", "expected a name of 1 to 255 bytes");
  if (r.ok() && out.token.size() > 255)
    r.fail("token", "expected at most 255 bytes");
  if (out.share.empty())
    out.share = out.name;
  return r.finish({"name", "token", "share", "quota_blocks"});
}

} // namespace

caf::expected<daemon_config> parse_daemon_config(std::string_view text, const std::string& file) {
  auto doc = parse_toml(text, file);
  if (!doc)
    return doc.error();
  daemon_config c;
  toml_reader top(*doc, file, "");
  if (const auto* d = top.sub_table("daemon")) {
    toml_reader r(*d, file, "daemon");
    r.read("socket", c.socket);
    r.read("tcp", c.tcp);
    r.read("metrics", c.metrics);
    r.read_bytes("block_bytes", c.block_bytes, 4 * kib, 1 * gib);
    r.read_bytes("max_frame_bytes", c.max_frame_bytes, 4 * kib, 64 * mib);
    r.read_bytes("max_region_bytes", c.max_region_bytes, 4 * kib, 64 * tib);
    r.read("max_sessions", c.max_sessions, 1, 1'000'000);
    r.read("copy_threads", c.copy_threads, 0u, 64u);
    if (r.ok() && c.block_bytes % 4096 != 0)
      r.fail("block_bytes", "expected a multiple of 4 KiB (the NVMe tier moves whole sectors)");
    if (r.ok() && c.socket.empty() && c.tcp.empty())
      r.fail("socket", "expected a socket path (or a tcp address): the daemon needs a way in");
    if (auto e = r.finish({"socket", "tcp", "metrics", "block_bytes", "max_frame_bytes", "max_region_bytes",
                           "max_sessions", "copy_threads"}))
      return e;
  }
  if (const auto* d = top.sub_table("dram")) {
    toml_reader r(*d, file, "dram");
    r.read_bytes("bytes", c.dram_bytes, 4 * kib, 64 * tib);
    r.read("prefault", c.dram_prefault);
    r.read("copy_gbps", c.dram_copy_gbps, 0.0, 10'000.0);
    if (auto e = r.finish({"bytes", "prefault", "copy_gbps"}))
      return e;
  }
  if (const auto* d = top.sub_table("nvme")) {
    toml_reader r(*d, file, "nvme");
    r.read("path", c.nvme_path);
    r.read_bytes("bytes", c.nvme_bytes, 0, 1024 * tib);
    std::string engine = "auto";
    r.read_choice("engine", engine, {"auto", "uring", "threads"});
    c.nvme.engine = engine == "uring" ? nvme_engine::uring
        : engine == "threads"         ? nvme_engine::threads
                                      : nvme_engine::automatic;
    r.read("direct_io", c.nvme.direct_io);
    r.read("queue_depth", c.nvme.queue_depth, 1, 4096);
    r.read("read_gbps", c.nvme_read_gbps, 0.0, 10'000.0);
    r.read("write_gbps", c.nvme_write_gbps, 0.0, 10'000.0);
    if (r.ok() && !c.nvme_path.empty() && c.nvme_bytes == 0)
      r.fail("bytes", "expected the NVMe tier's size (path is set)");
    if (auto e = r.finish({"path", "bytes", "engine", "direct_io", "queue_depth", "read_gbps", "write_gbps"}))
      return e;
  }
  if (const auto* node = doc->get("tenant")) {
    top.mark_known("tenant");
    const auto* arr = node->as_array();
    if (!arr)
      return make_error(errc::invalid_config,
                        top.where(node->source()) + ": tenant: expected [[tenant]] tables, one per tenant");
    std::set<std::string> names;
    for (std::size_t i = 0; i < arr->size(); ++i) {
      const auto* t = (*arr)[i].as_table();
      if (!t)
        return make_error(errc::invalid_config, top.where((*arr)[i].source()) + ": tenant: expected a table");
      tenant_config tc;
      if (auto e = read_tenant(*t, file, i, tc))
        return e;
      if (!names.insert(tc.name).second)
        return make_error(errc::invalid_config,
                          top.where(t->source()) + ": [[tenant]] name: \"" + tc.name + "\" is configured twice");
      c.tenants.push_back(std::move(tc));
    }
  }
  if (auto e = top.finish({"daemon", "dram", "nvme", "tenant"}))
    return e;
  if (c.tenants.empty())
    return make_error(errc::invalid_config, file + ": expected at least one [[tenant]] (name, token)");
  if (c.dram_slots() < 2)
    return make_error(errc::invalid_config,
                      file + ": [dram] bytes: expected room for at least 2 blocks of " + std::to_string(c.block_bytes) +
                          " bytes");
  if (!c.nvme_path.empty() && c.nvme_slots() < 2)
    return make_error(errc::invalid_config, file + ": [nvme] bytes: expected room for at least 2 blocks");
  return c;
}

caf::expected<daemon_config> read_daemon_config(const std::string& path) {
  auto text = read_text_file(path, "daemon config");
  if (!text)
    return text.error();
  return parse_daemon_config(*text, path);
}

} // namespace kvtier::daemon
