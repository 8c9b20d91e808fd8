#include "runtime/hardware_profile.hpp"

#include "runtime/config_bounds.hpp"
#include "runtime/embedded_files.hpp"
#include "runtime/error.hpp"
#include "runtime/toml_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <vector>

namespace kvtier {
namespace {

namespace b = config_bounds;

caf::error read_link(toml_reader& parent, std::string_view key, link_profile& link, std::string_view scope = "pcie.") {
  auto table = parent.sub_table(key);
  if (!table)
    return parent.error();
  toml_reader r(*table, parent.file(), fmt::format("{}{}", scope, key));
  r.read("gbps", link.gbps, b::link_gbps);
  r.read("latency_us", link.latency_us, b::microseconds);
  r.read("per_op_us", link.per_op_us, b::microseconds);
  return r.finish({"gbps", "latency_us", "per_op_us"});
}

caf::error read_hardware(const toml::table& root, const std::string& file, hardware_profile& hw) {
  toml_reader top(root, file, "");
  top.read("name", hw.name);
  top.read_bytes("dram", hw.dram_bytes, b::host_bytes);
  top.read_bytes("nvme", hw.nvme_bytes, b::host_bytes);
  if (auto t = top.sub_table("gpu")) {
    toml_reader r(*t, file, "gpu");
    auto& g = hw.gpu;
    r.read("name", g.name);
    r.read_bytes("hbm", g.hbm_bytes, b::gpu_hbm_bytes);
    r.read("hbm_gbps", g.hbm_gbps, b::gpu_hbm_gbps);
    r.read("bf16_tflops", g.bf16_tflops, b::gpu_bf16_tflops);
    r.read("compute_efficiency", g.compute_efficiency, b::efficiency);
    r.read("memory_efficiency", g.memory_efficiency, b::efficiency);
    r.read("step_overhead_us", g.step_overhead_us, b::microseconds);
    r.read_bytes("reserved", g.reserved_bytes, b::gpu_reserved_bytes);
    if (auto err = r.finish({"name", "hbm", "hbm_gbps", "bf16_tflops", "compute_efficiency", "memory_efficiency",
                             "step_overhead_us", "reserved"}))
      return err;
  }
  if (auto t = top.sub_table("pcie")) {
    toml_reader r(*t, file, "pcie");
    if (auto err = read_link(r, "h2d", hw.pcie.h2d))
      return err;
    if (auto err = read_link(r, "d2h", hw.pcie.d2h))
      return err;
    r.read("duplex_gbps", hw.pcie.duplex_gbps, b::link_gbps);
    if (auto err = r.finish({"h2d", "d2h", "duplex_gbps"}))
      return err;
  }
  if (auto t = top.sub_table("nvme_device")) {
    toml_reader r(*t, file, "nvme_device");
    auto& n = hw.nvme;
    r.read("read_gbps", n.read_gbps, b::link_gbps);
    r.read("write_gbps", n.write_gbps, b::link_gbps);
    r.read("read_iops", n.read_iops, b::iops);
    r.read("write_iops", n.write_iops, b::iops);
    r.read("queue_depth", n.queue_depth, b::device_queue_depth);
    r.read("latency_us", n.latency_us, b::microseconds);
    if (auto err = r.finish({"read_gbps", "write_gbps", "read_iops", "write_iops", "queue_depth", "latency_us"}))
      return err;
  }
  if (auto t = top.sub_table("compute")) {
    toml_reader r(*t, file, "compute");
    auto& c = hw.compute;
    r.read("model", c.model);
    r.read("dense_tokens", c.dense_tokens, 1, 1e9);
    r.read("dense_ms", c.dense_ms, 1e-6, 1e9);
    r.read("decode_attention_gbps", c.decode_attention_gbps, 0, 1e6);
    r.read("prefill_attention_tflops", c.prefill_attention_tflops, 0, 1e6);
    r.read("mixed_decode_attention_gbps", c.mixed_decode_attention_gbps, 0, 1e6);
    if (r.ok() && (c.model.empty() || c.dense_tokens.empty() || c.dense_tokens.size() != c.dense_ms.size()))
      r.fail("", "needs model, and dense_tokens and dense_ms of equal non-zero length");
    if (r.ok() && !std::is_sorted(c.dense_tokens.begin(), c.dense_tokens.end(), std::less_equal<>()))
      r.fail("dense_tokens", "expected strictly ascending numbers");
    if (auto err = r.finish({"model", "dense_tokens", "dense_ms", "decode_attention_gbps", "prefill_attention_tflops",
                             "mixed_decode_attention_gbps"}))
      return err;
  }
  if (top.has("nic"))
    if (auto err = read_link(top, "nic", hw.nic, ""))
      return err;
  return top.finish({"name", "dram", "nvme", "gpu", "pcie", "nvme_device", "nic", "compute"});
}

// Sizes as the profiles write them: "2TB", "141GB", else plain bytes.
std::string size_text(uint64_t bytes) {
  if (bytes != 0 && bytes % 1'000'000'000'000 == 0)
    return fmt::format("{}TB", bytes / 1'000'000'000'000);
  if (bytes != 0 && bytes % 1'000'000'000 == 0)
    return fmt::format("{}GB", bytes / 1'000'000'000);
  return fmt::format("{}", bytes);
}

} // namespace

std::optional<hardware_problem> find_hardware_problem(const hardware_profile& hw) {
  std::optional<hardware_problem> found;
  auto number = [&](const char* table, const char* key, double v, bounds<double> limit) {
    if (!found)
      if (auto what = number_problem(v, limit))
        found = hardware_problem{table, key, *what};
  };
  auto size = [&](const char* table, const char* key, uint64_t v, bounds<uint64_t> limit) {
    if (!found)
      if (auto what = size_problem(v, limit))
        found = hardware_problem{table, key, *what};
  };
  size("", "dram", hw.dram_bytes, b::host_bytes);
  size("", "nvme", hw.nvme_bytes, b::host_bytes);
  const auto& g = hw.gpu;
  size("gpu", "hbm", g.hbm_bytes, b::gpu_hbm_bytes);
  number("gpu", "hbm_gbps", g.hbm_gbps, b::gpu_hbm_gbps);
  number("gpu", "bf16_tflops", g.bf16_tflops, b::gpu_bf16_tflops);
  number("gpu", "compute_efficiency", g.compute_efficiency, b::efficiency);
  number("gpu", "memory_efficiency", g.memory_efficiency, b::efficiency);
  number("gpu", "step_overhead_us", g.step_overhead_us, b::microseconds);
  size("gpu", "reserved", g.reserved_bytes, b::gpu_reserved_bytes);
  for (auto [table, l] :
       {std::pair{"pcie.h2d", &hw.pcie.h2d}, std::pair{"pcie.d2h", &hw.pcie.d2h}, std::pair{"nic", &hw.nic}}) {
    number(table, "gbps", l->gbps, b::link_gbps);
    number(table, "latency_us", l->latency_us, b::microseconds);
    number(table, "per_op_us", l->per_op_us, b::microseconds);
  }
  number("pcie", "duplex_gbps", hw.pcie.duplex_gbps, b::link_gbps);
  const auto& n = hw.nvme;
  number("nvme_device", "read_gbps", n.read_gbps, b::link_gbps);
  number("nvme_device", "write_gbps", n.write_gbps, b::link_gbps);
  number("nvme_device", "read_iops", n.read_iops, b::iops);
  number("nvme_device", "write_iops", n.write_iops, b::iops);
  if (!found)
    if (auto what = integer_problem(n.queue_depth, b::device_queue_depth))
      found = hardware_problem{"nvme_device", "queue_depth", *what};
  number("nvme_device", "latency_us", n.latency_us, b::microseconds);
  return found;
}

caf::expected<hardware_profile> parse_hardware_profile(std::string_view text, const std::string& name) {
  auto root = parse_toml(text, name);
  if (!root)
    return std::move(root.error());
  hardware_profile hw;
  if (auto err = read_hardware(*root, name, hw))
    return err;
  return hw;
}

caf::expected<hardware_profile> load_hardware_profile(const std::string& name_or_path) {
  bool is_path = name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".toml");
  if (is_path) {
    auto root = parse_toml_file(name_or_path, "hardware profile");
    if (!root)
      return std::move(root.error());
    hardware_profile hw;
    if (auto err = read_hardware(*root, name_or_path, hw))
      return err;
    return hw;
  }
  auto text = embedded_file(fmt::format("hardware/{}.toml", name_or_path));
  if (!text) {
    std::vector<std::string_view> names;
    std::string list;
    for (const auto& file : embedded_files())
      if (file.name.starts_with("hardware/")) {
        auto n = file.name.substr(9, file.name.size() - 9 - 5);
        names.push_back(n);
        list += (list.empty() ? "" : ", ") + std::string(n);
      }
    auto hint = closest_match(name_or_path, names);
    return make_error(
        errc::invalid_config,
        fmt::format("unknown hardware profile \"{}\"{}; expected a built-in profile ({}) or a path to a .toml file",
                    name_or_path, hint.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", hint), list));
  }
  return parse_hardware_profile(*text, fmt::format("<built-in>/configs/hardware/{}.toml", name_or_path));
}

std::string hardware_profile_toml(const hardware_profile& hw, const std::string& note) {
  std::string t;
  t += fmt::format("# {}\n", note);
  t += fmt::format("name = \"{}\"\ndram = \"{}\"\nnvme = \"{}\"\n\n", hw.name, size_text(hw.dram_bytes),
                   size_text(hw.nvme_bytes));
  const auto& g = hw.gpu;
  t += fmt::format("[gpu]\nname = \"{}\"\nhbm = \"{}\"\nhbm_gbps = {}\nbf16_tflops = {}\ncompute_efficiency = {}\n"
                   "memory_efficiency = {}\nstep_overhead_us = {}\nreserved = \"{}\"\n\n",
                   g.name, size_text(g.hbm_bytes), g.hbm_gbps, g.bf16_tflops, g.compute_efficiency, g.memory_efficiency,
                   g.step_overhead_us, size_text(g.reserved_bytes));
  for (auto [key, l] : {std::pair{"h2d", &hw.pcie.h2d}, std::pair{"d2h", &hw.pcie.d2h}})
    t += fmt::format("[pcie.{}]\ngbps = {:.1f}                # one large pinned copy, measured\nlatency_us = {:.1f}\n"
                     "per_op_us = {:.2f}\n\n",
                     key, l->gbps, l->latency_us, l->per_op_us);
  t += fmt::format("[pcie]\nduplex_gbps = {:.1f}         # both directions at once, measured total\n\n",
                   hw.pcie.duplex_gbps);
  const auto& n = hw.nvme;
  t += fmt::format("[nvme_device]\nread_gbps = {}\nwrite_gbps = {}\nread_iops = {}\nwrite_iops = {}\nqueue_depth = {}\n"
                   "latency_us = {}\n",
                   n.read_gbps, n.write_gbps, n.read_iops, n.write_iops, n.queue_depth, n.latency_us);
  t += fmt::format(
      "\n[nic]                      # each direction; not measured by calibration\ngbps = {}\nlatency_us = {}\n"
      "per_op_us = {}\n",
      hw.nic.gbps, hw.nic.latency_us, hw.nic.per_op_us);
  if (const auto& c = hw.compute; c.present()) {
    auto list = [](const std::vector<double>& v, const char* f) {
      std::string out;
      for (size_t i = 0; i < v.size(); ++i)
        out += (i ? ", " : "") + fmt::format(fmt::runtime(f), v[i]);
      return out;
    };
    t += fmt::format(
        "\n[compute]                  # the forward of one model, measured by `kvtier calibrate --compute`\n"
        "model = \"{}\"\ndense_tokens = [{}]\ndense_ms = [{}]\ndecode_attention_gbps = {:.6g}\n"
        "prefill_attention_tflops = {:.6g}\nmixed_decode_attention_gbps = {:.6g}\n",
        c.model, list(c.dense_tokens, "{:.0f}"), list(c.dense_ms, "{:.4f}"), c.decode_attention_gbps,
        c.prefill_attention_tflops, c.mixed_decode_attention_gbps);
  }
  return t;
}

std::string nvme_device_toml(const nvme_profile& p) {
  return fmt::format(
      "[nvme_device]              # measured through kvtier's slot store (headers and checksums included)\n"
      "read_gbps = {:.2f}\nwrite_gbps = {:.2f}\nread_iops = {:.0f}\nwrite_iops = {:.0f}\nqueue_depth = {}\n"
      "latency_us = {:.1f}\n",
      p.read_gbps, p.write_gbps, p.read_iops, p.write_iops, p.queue_depth, p.latency_us);
}

} // namespace kvtier
