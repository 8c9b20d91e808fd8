#include "io/nvme_options.hpp"

#include "runtime/config.hpp"
#include "runtime/toml_reader.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace kvtier::io {

const std::vector<std::string_view>& nvme_option_keys() {
  static const std::vector<std::string_view> keys{"engine",        "queue_depth",   "sqpoll",       "direct_io",
                                                  "register_buffers", "large_block", "write_retries", "read_retries", "io_timeout_ms"};
  return keys;
}

void read_nvme_options(toml_reader& r, nvme_options& out) {
  std::string engine{to_string(out.engine)};
  r.read_choice("engine", engine, {"auto", "io_uring", "threads"});
  out.engine = engine == "io_uring" ? engine_choice::uring
               : engine == "threads" ? engine_choice::threads
                                     : engine_choice::automatic;
  r.read("queue_depth", out.queue_depth, 1, 4096);
  r.read("sqpoll", out.sqpoll);
  r.read("direct_io", out.direct_io);
  r.read("register_buffers", out.register_buffers);
  r.read_bytes("large_block", out.large_block_bytes, 0, uint64_t{1} << 30);
  r.read("write_retries", out.write_retries, 0, 100);
  r.read("read_retries", out.read_retries, 0, 100);
  r.read("io_timeout_ms", out.io_timeout_ms, 1, 3'600'000);
}

caf::expected<nvme_options> parse_nvme_options(std::string_view text, const std::string& name) {
  auto root = parse_toml(text, name);
  if (!root)
    return std::move(root.error());
  nvme_options out;
  const toml::table* tiers = root->get_as<toml::table>("tiers");
  const toml::table* nvme = tiers ? tiers->get_as<toml::table>("nvme") : nullptr;
  if (!nvme)
    return out;
  toml_reader r(*nvme, name, "tiers.nvme");
  read_nvme_options(r, out);
  if (!r.ok())
    return r.error();
  return out;
}

caf::expected<nvme_options> load_nvme_options(const config& cfg) {
  nvme_options out;
  if (std::filesystem::is_regular_file(cfg.source)) {
    std::ifstream in(cfg.source);
    std::stringstream text;
    text << in.rdbuf();
    auto parsed = parse_nvme_options(text.str(), cfg.source);
    if (!parsed)
      return parsed;
    out = std::move(*parsed);
  }
  out.file = slot_file_path(cfg.tiers.nvme_path);
  return out;
}

std::string slot_file_path(const std::string& nvme_path) {
  if (!nvme_path.empty() && nvme_path.back() == '/')
    return nvme_path + "kvtier.slots";
  return nvme_path + "/kvtier.slots";
}

std::string_view to_string(engine_choice e) {
  switch (e) {
    case engine_choice::automatic: return "auto";
    case engine_choice::uring: return "io_uring";
    case engine_choice::threads: return "threads";
  }
  return "?";
}

} // namespace kvtier::io
