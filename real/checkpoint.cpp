#include "real/checkpoint.hpp"

#include "kernels/quant/half.hpp"
#include "runtime/error.hpp"
#include "runtime/text_file.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

namespace kvtier {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

caf::error bad(const std::string& where, const std::string& what) {
  return make_error(errc::invalid_config, fmt::format("{}: {}", where, what));
}

caf::expected<json> read_json(const fs::path& path, std::string_view what) {
  auto text = read_text_file(path.string(), what);
  if (!text)
    return std::move(text.error());
  auto j = json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return bad(path.string(), fmt::format("{} is not a JSON object", what));
  return j;
}

/// One safetensors file: its header, and the stream its data follows.
struct shard {
  fs::path path;
  json header;
  uint64_t data_start = 0;
};

caf::expected<shard> open_shard(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return make_error(errc::invalid_config, fmt::format("{}: cannot open the safetensors file", path.string()));
  unsigned char size_bytes[8];
  if (!in.read(reinterpret_cast<char*>(size_bytes), 8))
    return bad(path.string(), "shorter than the 8-byte header length of a safetensors file");
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i)
    header_bytes = header_bytes << 8 | size_bytes[i];
  if (header_bytes > max_text_file_bytes * 4)
    return bad(
        path.string(),
        fmt::format("safetensors header of {} bytes; expected at most {}", header_bytes, max_text_file_bytes * 4));
  std::string text(header_bytes, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(header_bytes)))
    return bad(path.string(), "the safetensors header is cut short");
  auto header = json::parse(text, nullptr, false);
  if (header.is_discarded() || !header.is_object())
    return bad(path.string(), "the safetensors header is not a JSON object");
  return shard{path, std::move(header), 8 + header_bytes};
}

/// Reads tensor `name` of `count` elements into bf16.
caf::error read_tensor(const shard& s, const std::string& name, size_t count, std::vector<model::bf16>& out) {
  auto where = fmt::format("{}: tensor {}", s.path.string(), name);
  auto it = s.header.find(name);
  if (it == s.header.end())
    return bad(s.path.string(), fmt::format("tensor {} is missing", name));
  const auto& t = *it;
  if (!t.contains("dtype") || !t.contains("shape") || !t.contains("data_offsets"))
    return bad(where, "expected dtype, shape and data_offsets");
  auto dtype = t["dtype"].get<std::string>();
  size_t elements = 1;
  for (const auto& d : t["shape"])
    elements *= d.get<size_t>();
  if (elements != count)
    return bad(where, fmt::format("has {} elements (shape {}), expected {}", elements, t["shape"].dump(), count));
  size_t width = dtype == "BF16" || dtype == "F16" ? 2 : dtype == "F32" ? 4 : 0;
  if (width == 0)
    return bad(where, fmt::format("dtype {}; expected BF16, F16 or F32", dtype));
  auto begin = t["data_offsets"][0].get<uint64_t>(), end = t["data_offsets"][1].get<uint64_t>();
  if (end < begin || end - begin != count * width)
    return bad(where,
               fmt::format("data_offsets [{}, {}] hold {} bytes, expected {}", begin, end, end - begin, count * width));
  std::ifstream in(s.path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(s.data_start + begin));
  std::vector<char> raw(count * width);
  if (!in.read(raw.data(), static_cast<std::streamsize>(raw.size())))
    return bad(where, "the file ends before the tensor's data");
  out.resize(count);
  for (size_t i = 0; i < count; ++i) {
    if (dtype == "BF16") {
      std::memcpy(&out[i], raw.data() + 2 * i, 2);
    } else if (dtype == "F16") {
      uint16_t h;
      std::memcpy(&h, raw.data() + 2 * i, 2);
      out[i] = model::float_to_bf16(quant::half_to_float(h));
    } else {
      float f;
      std::memcpy(&f, raw.data() + 4 * i, 4);
      out[i] = model::float_to_bf16(f);
    }
  }
  return {};
}

template <class T>
caf::error take(const json& j, const char* key, T& out, const std::string& where, bool required = true) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null())
    return required ? bad(where, fmt::format("key {} is missing", key)) : caf::error{};
  if (!it->is_number())
    return bad(where, fmt::format("key {}: expected a number, got {}", key, it->dump()));
  out = it->get<T>();
  return {};
}

} // namespace

caf::expected<model::llama_config> read_checkpoint_config(const std::string& folder) {
  auto path = fs::path(folder) / "config.json";
  auto j = read_json(path, "the model config");
  if (!j)
    return std::move(j.error());
  const auto where = path.string();
  model::llama_config c;
  for (auto err : {take(*j, "vocab_size", c.vocab, where), take(*j, "hidden_size", c.hidden, where),
                   take(*j, "intermediate_size", c.intermediate, where), take(*j, "num_hidden_layers", c.layers, where),
                   take(*j, "num_attention_heads", c.q_heads, where), take(*j, "rms_norm_eps", c.rms_eps, where, false),
                   take(*j, "rope_theta", c.rope_theta, where, false)})
    if (err)
      return err;
  c.kv_heads = c.q_heads;
  if (auto err = take(*j, "num_key_value_heads", c.kv_heads, where, false))
    return err;
  c.head_dim = c.q_heads ? c.hidden / c.q_heads : 0;
  if (auto err = take(*j, "head_dim", c.head_dim, where, false))
    return err;
  c.tied_embeddings = j->value("tie_word_embeddings", false);
  if (auto s = j->find("rope_scaling"); s != j->end() && s->is_object()) {
    auto type = s->value("rope_type", s->value("type", std::string{}));
    if (type != "llama3")
      return bad(where, fmt::format("rope_scaling type \"{}\"; kvtier's model knows \"llama3\" only", type));
    c.scaling.enabled = true;
    for (auto err :
         {take(*s, "factor", c.scaling.factor, where), take(*s, "low_freq_factor", c.scaling.low_freq_factor, where),
          take(*s, "high_freq_factor", c.scaling.high_freq_factor, where),
          take(*s, "original_max_position_embeddings", c.scaling.original_max_positions, where)})
      if (err)
        return err;
  }
  if (auto problem = c.problem(); !problem.empty())
    return bad(where, problem);
  return c;
}

caf::expected<model::llama_weights> load_checkpoint(const std::string& folder) {
  auto shape = read_checkpoint_config(folder);
  if (!shape)
    return std::move(shape.error());
  // Which file holds which tensor: the index's weight_map, or the one file.
  std::map<std::string, std::string> file_of;
  auto index_path = fs::path(folder) / "model.safetensors.index.json";
  bool sharded = fs::exists(index_path);
  if (sharded) {
    auto index = read_json(index_path, "the shard index");
    if (!index)
      return std::move(index.error());
    auto map = index->find("weight_map");
    if (map == index->end() || !map->is_object())
      return bad(index_path.string(), "key weight_map is missing or not an object");
    for (auto& [name, file] : map->items())
      file_of[name] = file.get<std::string>();
  }
  std::map<std::string, shard> shards;
  auto load = [&](const std::string& name, size_t count, std::vector<model::bf16>& out) -> caf::error {
    std::string file = "model.safetensors";
    if (sharded) {
      auto it = file_of.find(name);
      if (it == file_of.end())
        return bad(index_path.string(), fmt::format("weight_map does not name tensor {}", name));
      file = it->second;
    }
    auto s = shards.find(file);
    if (s == shards.end()) {
      auto opened = open_shard(fs::path(folder) / file);
      if (!opened)
        return std::move(opened.error());
      s = shards.emplace(file, std::move(*opened)).first;
    }
    return read_tensor(s->second, name, count, out);
  };
  const auto& c = *shape;
  const size_t h = c.hidden, q = size_t{c.q_heads} * c.head_dim, kv = size_t{c.kv_heads} * c.head_dim,
               f = c.intermediate, v = c.vocab;
  model::llama_weights w;
  w.config = c;
  w.layers.resize(c.layers);
  if (auto err = load("model.embed_tokens.weight", v * h, w.embed))
    return err;
  for (uint32_t l = 0; l < c.layers; ++l) {
    auto& lw = w.layers[l];
    auto p = fmt::format("model.layers.{}.", l);
    for (auto err :
         {load(p + "input_layernorm.weight", h, lw.attn_norm), load(p + "self_attn.q_proj.weight", q * h, lw.wq),
          load(p + "self_attn.k_proj.weight", kv * h, lw.wk), load(p + "self_attn.v_proj.weight", kv * h, lw.wv),
          load(p + "self_attn.o_proj.weight", h * q, lw.wo),
          load(p + "post_attention_layernorm.weight", h, lw.mlp_norm),
          load(p + "mlp.gate_proj.weight", f * h, lw.w_gate), load(p + "mlp.up_proj.weight", f * h, lw.w_up),
          load(p + "mlp.down_proj.weight", h * f, lw.w_down)})
      if (err)
        return err;
  }
  if (auto err = load("model.norm.weight", h, w.final_norm))
    return err;
  if (!c.tied_embeddings)
    if (auto err = load("lm_head.weight", v * h, w.lm_head))
      return err;
  return w;
}

} // namespace kvtier
